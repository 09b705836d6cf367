module github.com/int8bert/int8bert

go 1.26.8

require github.com/klauspost/cpuid/v2 v2.4.2

require golang.org/x/sys v0.50.0

require (
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
)
