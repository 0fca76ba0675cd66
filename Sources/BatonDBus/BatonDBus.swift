// BatonDBus: see docs/architecture.md.
