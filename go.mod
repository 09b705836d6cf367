module github.com/int8bert/int8bert

go 1.26.8

require github.com/klauspost/cpuid/v2 v2.4.2

require (
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.50.0
	gonum.org/v1/gonum v0.17.0
)

require go.yaml.in/yaml/v3 v3.0.5
