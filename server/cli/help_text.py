"""Help texts the argument parser needs, in a module that imports nothing, so ``--help`` stays fast."""

GOAL_HELP = (
    "goal: [OUTPUT=]class:LABEL[@CONFIDENCE] | [OUTPUT=]value:V[~TOLERANCE] (relative, below 1: ~0.05 is "
    "within five per cent of V) | [OUTPUT=]range:LOW..HIGH (an end may be left open: 600..)"
)
