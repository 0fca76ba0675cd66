// BatonService: see docs/architecture.md.
