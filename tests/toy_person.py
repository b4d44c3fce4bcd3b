"""The CSCF paper's toy person and actions (its Figure 2), shared by the plan tests."""

from __future__ import annotations

from typing import Any

from counterplan.planning import CategoricalFeature, IntegerFeature
from counterplan.planning.space import FeatureSpace


def toy_space() -> FeatureSpace:
    """The CSCF paper's toy person (its Figure 2): a seller with a high-school degree in Germany."""
    return FeatureSpace(
        [
            CategoricalFeature(name="job", value="Seller", categories=("Seller", "Developer")),
            CategoricalFeature(name="education", value="HS", categories=("HS", "BSc")),
            CategoricalFeature(name="location", value="Germany", categories=("Germany", "US")),
            IntegerFeature(name="age", value=30, low=18, high=90),
        ]
    )


TOY = {
    "actions": [
        {"name": "job", "feature": "job", "kind": "set", "values": ["Developer"], "effort": 10},
        {
            "name": "degree",
            "feature": "education",
            "kind": "set",
            "values": ["BSc"],
            "effort": 5,
            "consequences": {"age": "age + 4"},
        },
        {"name": "move", "feature": "location", "kind": "set", "values": ["US"], "effort": 15},
    ],
    "graph": [
        {"source": "location", "target": "education", "tau": '1 if location == "US" else 0.5'},
        {"source": "location", "target": "job", "tau": '0.5 if location == "US" else 1'},
        {"source": "education", "target": "job", "tau": '0.5 if education == "BSc" else 1'},
    ],
}


def bad_everywhere(actions: int, edges: int) -> dict[str, list[dict[str, Any]]]:
    """Six bad fields an action (its feature, effort, pre, post and two consequences) and three an
    edge (source, target, tau) on the toy person: each found only against the features, so the
    data passes its own checks and all are reported when it is compiled (in Python and on the wire)."""
    return {
        "actions": [
            {
                "name": f"a{i}",
                "feature": f"nowhere{i}",
                "effort": "salary",
                "pre": "salary > 1",
                "post": "job == 3",
                "consequences": {"age": "salary", "height": "1"},
            }
            for i in range(actions)
        ],
        "graph": [{"source": "city", "target": "town", "tau": "salary"} for _ in range(edges)],
    }
