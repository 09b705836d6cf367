// The demo's model and data. A separate module so that the main module's zip
// (what `go get github.com/int8bert/int8bert` downloads) leaves them out.
module github.com/int8bert/int8bert/assets

go 1.26
