// BatonStore: see docs/architecture.md.
