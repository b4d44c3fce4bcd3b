"""Action plans (CSCF): random-key genomes decoded into ordered action sequences, unrolled on
whole populations of states (:mod:`~solver.plans.genome`, :mod:`~solver.plans.unroll`)."""
