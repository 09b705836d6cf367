//go:build !(linux && amd64)

package cpu

// archRequestAMX reports that AMX permission is only requested on linux/amd64.
func archRequestAMX() AMXPermission {
	return AMXPermission{AMXNotRequested, "not linux/amd64"}
}
