// Package cgo is the only package of int8bert that imports "C". It is a thin,
// mechanical Go face of the C shim in shim.c, which hides the differences
// between oneDNN 2.x and 3.x. Everything idiomatic (validation, locking,
// errors, runtime cleanups) lives in package dnnl, the only importer of this one.
//
// The package is empty when built with CGO_ENABLED=0 or the nodnnl tag.
// It must not import any other int8bert package.
//
// oneDNN is found through pkg-config (the package "dnnl"); point
// PKG_CONFIG_PATH at the folder holding dnnl.pc to use a oneDNN installed in
// another prefix.
package cgo
