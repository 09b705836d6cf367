//go:build !unix

package checkpoint

import "os"

// mapFile reads the whole file: this build has no mmap.
func mapFile(f *os.File) ([]byte, func() error, error) {
	return readWhole(f)
}
