// Package teipb is the Go code protoc generates from TEI v1.9.3's gRPC
// API (package tei.v1, serve/testdata/tei-v1.9.3/tei.proto): its messages
// and the client and server stubs of its services. serve implements the
// servers (docs/DESIGN.md section 9.8); scripts/check-generate.sh checks
// that these files are the generators' output.
package teipb

//go:generate sh gen.sh
