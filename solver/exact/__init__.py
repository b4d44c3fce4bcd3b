"""The exact engine: the counterfactual problem as a mixed-integer program, solved to a proven optimum.

The program is plain data (:mod:`~counterplan.solver.exact.milp`) solved by a backend (HiGHS or
OR-Tools); the phase (:mod:`~counterplan.solver.exact.phase`) warm-starts it from the best
solution so far and checks every answer through the real model.
"""
