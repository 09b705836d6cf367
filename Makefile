# Convenience wrappers; the scripts are the source of truth (make is not on a
# fresh Debian 12 machine).
.PHONY: demo test setup
demo:
	scripts/demo.sh
test:
	scripts/test.sh
setup:
	scripts/setup.sh
