"""The tuning study's sampler: optuna's TPE whose random draws for a trial come from the run's
seed and the trial's number.

A sampler seeded once per run drew the same start-up configurations in every ``tune`` run started
at once on one storage (optuna's way to tune in parallel): the runs measured the same trials
twice and learnt nothing from the second copies. A trial's number is unique in its study (the
storage hands them out), so seeding each trial's draws from ``(seed, number)`` gives parallel
runs distinct trials, a resumed study new ones (never a replay of its start-up trials), and one
run the same trials every time. ``constant_liar`` makes TPE treat trials still running in other
processes as bad ones, so runs in parallel also spread out after the start-up trials.
"""

from __future__ import annotations

import numpy as np
import optuna
from optuna.trial import FrozenTrial

SAMPLER_SEEDS = 2**32
"""Seeds optuna's sampler takes (numpy's legacy generator): 0 to 2**32 - 1."""


class TrialSeededSampler(optuna.samplers.TPESampler):
    """TPE (with the constant liar) reseeded before each trial from ``(seed, trial.number)``."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed=seed % SAMPLER_SEEDS, constant_liar=True)
        self._run_seed = seed

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Reseed TPE's own generator and its start-up random sampler's for this trial."""
        tpe, start_up = np.random.SeedSequence([self._run_seed, trial.number]).generate_state(2)
        self._rng.rng.seed(int(tpe))
        self._random_sampler._rng.rng.seed(int(start_up))
        super().before_trial(study, trial)
