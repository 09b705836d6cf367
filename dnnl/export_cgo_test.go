//go:build cgo && !nodnnl

package dnnl

import dc "github.com/int8bert/int8bert/dnnl/cgo"

// Live is the shim's process-wide count of live engines, matmuls, layouts
// and C allocations, for the tests in package dnnl_test.
func Live() dc.LiveCounts { return dc.Live() }
