// BatonTransport: see docs/architecture.md.
