package kernels

// The generated assembly and its Go declarations. Each generator is a
// command of the module in _gen (avo), named after the files it writes;
// `go generate ./kernels/...` rewrites them all, and
// scripts/check-generate.sh fails when the result differs from what is
// committed.

//go:generate go run -C _gen ./gemm_u8s8_vnni -out ../gemm_u8s8_vnni_amd64.s -stubs ../gemm_u8s8_vnni_stub_amd64.go -twin ../gemm_u8s8_vnni_noasm.go -pkg kernels
//go:generate go run -C _gen ./gemm_u8s8_avx2 -out ../gemm_u8s8_avx2_amd64.s -stubs ../gemm_u8s8_avx2_stub_amd64.go -pkg kernels
//go:generate go run -C _gen ./gemm_u8s8_avxvnni -out ../gemm_u8s8_avxvnni_amd64.s -stubs ../gemm_u8s8_avxvnni_stub_amd64.go -pkg kernels
//go:generate go run -C _gen ./gemm_f32_avx512 -out ../gemm_f32_avx512_amd64.s -stubs ../gemm_f32_avx512_stub_amd64.go -pkg kernels -table ../gemm_f32_avx512_table_amd64.go
//go:generate go run -C _gen ./gemm_f32_avx2 -out ../gemm_f32_avx2_amd64.s -stubs ../gemm_f32_avx2_stub_amd64.go -pkg kernels
//go:generate go run -C _gen ./gemm_bf16_avx512 -out ../gemm_bf16_avx512_amd64.s -stubs ../gemm_bf16_avx512_stub_amd64.go -pkg kernels -table ../gemm_bf16_avx512_table_amd64.go
//go:generate go run -C _gen ./eltwise_avx512 -out ../eltwise_avx512_amd64.s -stubs ../eltwise_avx512_stub_amd64.go -pkg kernels
//go:generate go run -C _gen ./eltwise_avx2 -out ../eltwise_avx2_amd64.s -stubs ../eltwise_avx2_stub_amd64.go -pkg kernels
//go:generate go run -C _gen ./peak -out ../peak/peak_amd64.s -stubs ../peak/peak_stub_amd64.go -pkg peak
