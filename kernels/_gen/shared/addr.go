package shared

import (
	"github.com/mmcloughlin/avo/gotypes"
	. "github.com/mmcloughlin/avo/operand"
)

// Addr is the stack address of an argument or result c, for a memory
// operand: a VEX instruction can then read or write a float32 there
// itself, where avo's Load and Store would emit a legacy-SSE MOVSS, which
// after 256-bit code costs a state transition (Haswell) or a false
// dependency (later Intel cores). A c that does not resolve stops the
// generator (a bug in it).
func Addr(c gotypes.Component) Mem {
	b, err := c.Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}
