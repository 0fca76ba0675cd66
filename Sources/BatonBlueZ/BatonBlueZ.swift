// BatonBlueZ: see docs/architecture.md.
