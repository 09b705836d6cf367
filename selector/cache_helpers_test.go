package selector

import (
	"errors"
	"fmt"
)

// loadCache reads the cache file at path and returns its one section: a
// file of another format gives its format and no entries; a file of
// several sections is an error.
func loadCache(path string) (*Cache, error) {
	f, err := LoadCacheFile(path)
	if err != nil {
		return nil, err
	}
	if f.Format != CacheFormat {
		return &Cache{Header: Header{Format: f.Format}, Entries: map[string]Choice{}}, nil
	}
	if len(f.Sections) != 1 {
		return nil, errors.New(fmt.Sprint("cache ", path, " has ", len(f.Sections), " sections, want 1"))
	}
	return &f.Sections[0], nil
}

// saveCache writes c as the only section of a cache file at path.
func saveCache(c *Cache, path string) error {
	return (&CacheFile{Format: CacheFormat, Sections: []Cache{*c}}).Save(path)
}
