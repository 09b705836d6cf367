module github.com/int8bert/int8bert

go 1.26.8

require github.com/klauspost/cpuid/v2 v2.4.2

require golang.org/x/sys v0.50.0
