"""The CSCF paper's toy person and actions (its Figure 2), shared by the plan tests."""

from __future__ import annotations

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
