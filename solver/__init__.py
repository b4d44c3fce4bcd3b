"""counterplan's search engines (local search phases, termination, events). See DESIGN.md."""
