"""Help texts the argument parser needs, in a module that imports nothing, so ``--help`` stays fast."""

GOAL_HELP = (
    "goal: [OUTPUT=]class:LABEL[@CONFIDENCE] | [OUTPUT=]value:V[~TOLERANCE] | [OUTPUT=]range:LOW..HIGH "
    "(an end may be left open: 600..)"
)
