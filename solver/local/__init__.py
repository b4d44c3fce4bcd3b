"""Local search: move selectors, acceptors, forager, and the construction (feature scan) and
polish (boundary polish) phases around it."""
