//go:build !linux

package selector

import "errors"

var errNoThreadPriority = errors.New("thread priorities are not set on this OS")

func lowerThreadPriority() (string, error) { return "", errNoThreadPriority }

func threadPolicy(int) (uint32, int, error) { return 0, 0, errNoThreadPriority }
