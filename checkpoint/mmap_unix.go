//go:build unix

package checkpoint

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapFile maps the whole file read-only. The returned release function unmaps
// it. Empty files are returned as an empty slice without a mapping.
func mapFile(f *os.File) ([]byte, func() error, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := fi.Size()
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("file of %d bytes too large to map", size)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		// Some file systems cannot be mapped: read the file instead.
		return readWhole(f)
	}
	mapped.Store(&b[0], true)
	return b, func() error { mapped.Delete(&b[0]); return unix.Munmap(b) }, nil
}

// mapped holds the first byte of every live mapping mapFile made, so that
// dropResident can tell a mapping from a file read into memory.
var mapped sync.Map

// dropResident tells the kernel that the pages of b, a part of a mapping
// mapFile made, are not needed now: they leave the process's resident set
// (they stay in the page cache) and a later read faults them in again
// from the file. A buffer read into memory is left as it is.
func dropResident(whole, b []byte) error {
	if len(whole) == 0 || len(b) == 0 {
		return nil
	}
	if _, ok := mapped.Load(&whole[0]); !ok {
		return nil
	}
	// madvise takes whole pages: round the start up and the end down,
	// so that no page outside b is dropped.
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&b[0]))
	end := start + uintptr(len(b))
	lo, hi := (start+page-1)&^(page-1), end&^(page-1)
	if hi <= lo {
		return nil
	}
	return unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED)
}
