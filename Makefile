# Install Baton (see scripts/install): `make && sudo make install`, `sudo make uninstall`.
# PREFIX (default /usr/local) and DESTDIR (a staging directory) are honoured.
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all install uninstall manifest deb test

all:
	scripts/install --build-only

install:
	scripts/install --prefix "$(PREFIX)" --destdir "$(DESTDIR)"

uninstall:
	scripts/install --uninstall --prefix "$(PREFIX)" --destdir "$(DESTDIR)"

# The files `make install` places (without DESTDIR).
manifest:
	@scripts/install --list --prefix "$(PREFIX)"

# The Debian package, built, checked with lintian and tried in a clean Debian root.
deb:
	scripts/package-test

test:
	scripts/test
