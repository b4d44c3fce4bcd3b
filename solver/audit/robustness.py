"""Are the answers robust to a refit? ``retrain=K``: the model refit on K bootstrap samples of its
training data, and each refit asked whether the audit's answers still meet the goal.

A counterfactual tells an applicant what would change the decision of *this* model; a bank
retrains its model, and an answer that sits on the old model's boundary may not survive
(Upadhyay et al., "Towards robust and reliable algorithmic recourse", 2021; Pawelczyk et al.,
"On counterfactual explanations under predictive multiplicity", 2020). Each refit is a
``sklearn.base.clone`` of the model fitted on a seeded bootstrap sample of the training rows
(every unset ``random_state`` of the clone seeded too, so a refit is the same on every run); its
verdict on all the answers is one batched call of the refit model, judged as a row's own solve
judges "meets the goal" (:func:`counterplan.solver.batch.rows.meeting_the_goal`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from counterplan.planning.errors import ProblemError
from counterplan.planning.models import ModelAdapter
from counterplan.solver.audit.report import Robustness
from counterplan.solver.audit.stats import STATUS
from counterplan.solver.batch.records import PROPOSED_PREFIX
from counterplan.solver.batch.rows import id_text, meeting_the_goal
from counterplan.solver.explainer import Explainer

RETRAIN_STREAM = 0x5EED
"""Mixed into the audit's seed for the refits' samples (apart from the bootstrap intervals' streams)."""


def refit_clone(explainer: Explainer) -> Any:
    """An unfitted clone of the explainer's model, or a clear refusal (field ``retrain``) for a
    model that cannot be refit here: not a scikit-learn estimator (a remote or ONNX model, a
    scorecard, an adapter), or no labelled training data."""
    from sklearn.base import clone  # noqa: PLC0415 - only a refit needs it

    model = explainer.model
    if isinstance(model, ModelAdapter) or not hasattr(model, "get_params") or not hasattr(model, "fit"):
        raise ProblemError(
            "retrain", f"a {type(model).__name__} cannot be refit here: retrain needs a scikit-learn estimator"
        )
    if explainer.data is None or explainer.target is None:
        raise ProblemError("retrain", "retrain needs the training data with its label column (give target=)")
    try:
        return clone(model)
    except Exception as exc:  # an estimator whose parameters cannot be copied
        raise ProblemError("retrain", f"the model cannot be cloned to refit it: {type(exc).__name__}: {exc}") from None


def _seeded(model: Any, seed: int) -> Any:
    """``model`` with every ``random_state`` left unset given ``seed`` (a refit is then repeatable)."""
    unset = {
        name: seed
        for name, value in model.get_params(deep=True).items()
        if name.endswith("random_state") and value is None
    }
    return model.set_params(**unset) if unset else model


def answers_frame(frame: pd.DataFrame, rows: pd.DataFrame, features: Sequence[str], target: str | None) -> pd.DataFrame:
    """The audited rows with recourse, each with its answer's values in place of its own (the
    model's columns and the label only)."""
    valid = rows[(rows[STATUS].astype(str) == "with_recourse").to_numpy()]
    labels = {id_text(label): label for label in frame.index}
    chosen = [labels[id_text(r)] for r in valid["row_id"]]
    keep = {*features, *([] if target is None else [target])}
    answers = frame.loc[chosen, [c for c in frame.columns if c in keep]].copy()
    for name in features:
        column = valid[PROPOSED_PREFIX + name].to_numpy()
        if pd.api.types.is_integer_dtype(answers[name]) and not pd.isna(column).any():
            answers[name] = pd.Series(np.round(column.astype(np.float64)), index=answers.index).astype(
                answers[name].dtype
            )
        else:
            answers[name] = pd.Series(column, index=answers.index).astype(object).where(~pd.isna(column), np.nan)
    return answers


def retrain_shares(
    explainer: Explainer, *, frame: pd.DataFrame, rows: pd.DataFrame, features: Sequence[str], k: int, seed: int
) -> Robustness:
    """The share of the audit's answers each of ``k`` refits still accepts."""
    blank = refit_clone(explainer)
    assert explainer.data is not None and explainer.target is not None
    answers = answers_frame(frame, rows, features, explainer.target)
    data = explainer.data
    names = getattr(explainer.model, "feature_names_in_", None)
    columns = [str(n) for n in names] if names is not None else list(explainer.columns)
    x, y = data[columns], data[explainer.target]
    rng = np.random.default_rng([seed, RETRAIN_STREAM])
    shares: list[float] = []
    for i in range(k):
        sample = rng.integers(0, len(data), size=len(data))
        refit = _seeded(refit_clone(explainer) if i else blank, seed + i)
        try:
            refit.fit(x.iloc[sample], y.iloc[sample])
        except Exception as exc:  # a sample with one class, an estimator that refuses
            raise ProblemError("retrain", f"refit {i + 1} of {k} failed: {type(exc).__name__}: {exc}") from None
        if not len(answers):
            continue
        judge = Explainer(  # the data's profile as read once: domains and kinds are the audit's
            refit,
            profile=explainer.profile,
            spec=explainer.spec,
            target=explainer.target,
            columns=explainer.columns,
            config=explainer.config,
            check=False,
        )
        shares.append(float(meeting_the_goal(judge, answers).mean()))
    return Robustness(
        k=k,
        answers=len(answers),
        shares=shares,
        mean=float(np.mean(shares)) if shares else None,
        minimum=float(np.min(shares)) if shares else None,
    )
