package bench

import (
	"fmt"

	"github.com/int8bert/int8bert/kernels/peak"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
)

// sayer is a printf onto progress (nil: nothing).
func sayer(progress func(string)) func(format string, args ...any) {
	return func(format string, args ...any) {
		if progress != nil {
			progress(fmt.Sprintf(format, args...))
		}
	}
}

// syncOr is sel, or the process-wide synchronous selector: the bench's
// figures are those of tuned kernels (docs/DESIGN.md section 4.8).
func syncOr(sel *selector.Selector) (*selector.Selector, error) {
	if sel != nil {
		return sel, nil
	}
	return selector.DefaultSync()
}

// peakKind is the peak loop of a precision's arithmetic.
func peakKind(prec models.Precision) peak.Kind {
	switch {
	case prec.Int8():
		return peak.Int8
	case prec == models.PrecisionBF16:
		return peak.BF16
	}
	return peak.FP32
}
