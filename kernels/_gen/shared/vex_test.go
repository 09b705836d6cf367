package shared

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestVPDPBUSDVEX256Known checks encodings read off GNU as / objdump
// (binutils 2.40: `{vex} vpdpbusd %ymm3,%ymm2,%ymm1` and so on; AT&T
// order is src2, src1, dst).
func TestVPDPBUSDVEX256Known(t *testing.T) {
	for _, c := range []struct {
		dst, src1, src2 int
		want            []byte
	}{
		{1, 2, 3, []byte{0xc4, 0xe2, 0x6d, 0x50, 0xcb}},
		{0, 14, 15, []byte{0xc4, 0xc2, 0x0d, 0x50, 0xc7}},
		{11, 8, 12, []byte{0xc4, 0x42, 0x3d, 0x50, 0xdc}},
	} {
		got, err := VPDPBUSDVEX256(c.dst, c.src1, c.src2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("Y%d += Y%d.Y%d: % x, want % x", c.dst, c.src1, c.src2, got, c.want)
		}
	}
}

func TestVPDPBUSDVEX256Range(t *testing.T) {
	for _, r := range [][3]int{{16, 0, 0}, {0, -1, 0}, {0, 0, 31}} {
		if _, err := VPDPBUSDVEX256(r[0], r[1], r[2]); err == nil {
			t.Errorf("%v: no error for a register outside 0...15", r)
		}
	}
}

// TestVPDPBUSDVEX256Assembler compares every register triple with what
// GNU as encodes for `{vex} vpdpbusd`, where as and objdump are installed.
func TestVPDPBUSDVEX256Assembler(t *testing.T) {
	as, err1 := exec.LookPath("as")
	objdump, err2 := exec.LookPath("objdump")
	if err1 != nil || err2 != nil {
		t.Skip("GNU as or objdump not installed: cannot cross-check the VEX VPDPBUSD encoding")
	}
	dir := t.TempDir()
	var src strings.Builder
	type triple struct{ d, s1, s2 int }
	var order []triple
	for d := 0; d < 16; d++ {
		for s1 := 0; s1 < 16; s1++ {
			for s2 := 0; s2 < 16; s2++ {
				fmt.Fprintf(&src, "{vex} vpdpbusd %%ymm%d,%%ymm%d,%%ymm%d\n", s2, s1, d)
				order = append(order, triple{d, s1, s2})
			}
		}
	}
	s, o := filepath.Join(dir, "x.s"), filepath.Join(dir, "x.o")
	if err := os.WriteFile(s, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(as, "-o", o, s).CombinedOutput(); err != nil {
		t.Skipf("this GNU as does not assemble {vex} vpdpbusd (binutils < 2.36?): %v: %s", err, out)
	}
	out, err := exec.Command(objdump, "-d", o).Output()
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^\s*[0-9a-f]+:\s+((?:[0-9a-f]{2} )+)\s*\{vex\} vpdpbusd`)
	i := 0
	for _, l := range strings.Split(string(out), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var want []byte
		for _, h := range strings.Fields(m[1]) {
			v, _ := strconv.ParseUint(h, 16, 8)
			want = append(want, byte(v))
		}
		if i >= len(order) {
			t.Fatalf("objdump lists more instructions than assembled")
		}
		c := order[i]
		got, err := VPDPBUSDVEX256(c.d, c.s1, c.s2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Y%d += Y%d.Y%d: % x, as says % x", c.d, c.s1, c.s2, got, want)
		}
		i++
	}
	if i != len(order) {
		t.Fatalf("objdump listed %d of %d instructions", i, len(order))
	}
}
