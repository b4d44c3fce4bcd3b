"""The solver core, which names no engine: the Solver and its phase contract (protocol, scope,
registry), scopes, termination, events, the pool of feasible rows, boundary refinement, the solver
configuration and the per-step budget. Engines are phase types registered from above
(:mod:`counterplan.solver.phases`)."""
