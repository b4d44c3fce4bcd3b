"""Action plans (CSCF): random-key genomes decoded into ordered action sequences, unrolled on
whole populations of states (:mod:`~counterplan.solver.plans.genome`, :mod:`~counterplan.solver.plans.unroll`)."""
