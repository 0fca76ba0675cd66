// BatonClient: see docs/architecture.md.
