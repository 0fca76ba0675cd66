// BatonCore: see docs/architecture.md.
