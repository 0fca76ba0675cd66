// BatonCrypto: see docs/architecture.md.
