// Package layout holds no code: its test enforces the import rules of
// docs/DESIGN.md section 1.1. It runs `go list -deps -json` over the module
// in a few build configurations (the host's, CGO_ENABLED=0 with the noasm
// and nodnnl tags, and another GOOS/GOARCH) and fails on every direct import
// the design forbids, naming the importing package and the forbidden
// import.
//
// The rules are a table in layout_test.go that mirrors the table of
// docs/DESIGN.md section 1.1 row for row: change both together. A package
// with no row fails the test until it gets one, so that every new package
// is placed in the design.
//
// The rules apply to the code that ships. _test.go files may reach up for
// an oracle (the dnnl tests use the kernels' references), so their imports
// are not checked.
//
// Package layout must not import any other int8bert package, and nothing
// imports it.
package layout
