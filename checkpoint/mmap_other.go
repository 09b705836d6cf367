//go:build !unix

package checkpoint

import "os"

// mapFile reads the whole file: this build has no mmap.
func mapFile(f *os.File) ([]byte, func() error, error) {
	return readWhole(f)
}

// dropResident does nothing: nothing is mapped.
func dropResident(whole, b []byte) error { return nil }
