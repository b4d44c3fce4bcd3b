"""The core every engine shares: the engine protocol, scopes, termination, events, results,
configuration, the per-step budget, and the batched scoring helpers."""
