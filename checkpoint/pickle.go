package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The pickle machine below understands the subset of the pickle protocol
// torch.save emits for state dicts. It never imports or calls anything: the
// only globals it accepts are a fixed list of names (allowedGlobals), and
// "calling" one of them just builds a Go value. Any other global is an error
// naming it.

// pyGlobal is a global reference (module.name) from GLOBAL or STACK_GLOBAL.
type pyGlobal struct{ module, name string }

func (g pyGlobal) String() string { return g.module + "." + g.name }

type pyTuple []any

type pyList struct{ items []any }

// pyDict keeps insertion order, like the OrderedDicts torch saves.
type pyDict struct {
	keys []any
	vals map[any]any
}

func newDict() *pyDict { return &pyDict{vals: map[any]any{}} }

func (d *pyDict) set(k, v any) error {
	switch k.(type) {
	case string, int64, bool, nil, float64:
	default:
		return fmt.Errorf("unsupported dict key of type %T", k)
	}
	if _, ok := d.vals[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.vals[k] = v
	return nil
}

// storageRef is what a persistent id ('storage', type, key, location, numel)
// resolves to.
type storageRef struct {
	dtype Dtype
	key   string
	numel int64
}

// torchTensor is the result of torch._utils._rebuild_tensor_v2.
type torchTensor struct {
	storage *storageRef
	offset  int64
	size    []int
	stride  []int64
}

// storageTypes maps torch's legacy storage classes to dtypes.
var storageTypes = map[string]Dtype{
	"FloatStorage":    F32,
	"HalfStorage":     F16,
	"BFloat16Storage": BF16,
	"DoubleStorage":   F64,
	"LongStorage":     I64,
	"IntStorage":      I32,
	"ShortStorage":    I16,
	"CharStorage":     I8,
	"ByteStorage":     U8,
	"BoolStorage":     BOOL,
}

// allowedGlobal reports whether module.name may appear in a checkpoint.
func allowedGlobal(module, name string) bool {
	switch module {
	case "collections":
		return name == "OrderedDict"
	case "torch._utils":
		return name == "_rebuild_tensor_v2" || name == "_rebuild_parameter"
	case "torch":
		_, ok := storageTypes[name]
		return ok
	}
	return false
}

// maxPickleItems bounds the stack and memo to keep hostile inputs cheap.
const maxPickleItems = 1 << 24

// unpickle runs the restricted pickle machine over data and returns the
// top-level object.
func unpickle(data []byte) (any, error) {
	u := &unpickler{data: data, memo: map[uint32]any{}}
	v, err := u.run()
	if err != nil {
		return nil, fmt.Errorf("pickle at byte %d: %w", u.pos, err)
	}
	return v, nil
}

type unpickler struct {
	data  []byte
	pos   int
	stack []any
	marks []int
	memo  map[uint32]any
}

var errTruncated = errors.New("unexpected end of data")

func (u *unpickler) read(n int) ([]byte, error) {
	if n < 0 || n > len(u.data)-u.pos {
		return nil, errTruncated
	}
	b := u.data[u.pos : u.pos+n]
	u.pos += n
	return b, nil
}

func (u *unpickler) readLine() (string, error) {
	i := bytes.IndexByte(u.data[u.pos:], '\n')
	if i < 0 {
		return "", errTruncated
	}
	s := string(u.data[u.pos : u.pos+i])
	u.pos += i + 1
	return s, nil
}

func (u *unpickler) uint(n int) (uint64, error) {
	b, err := u.read(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, nil
}

func (u *unpickler) push(v any) { u.stack = append(u.stack, v) }

func (u *unpickler) pop() (any, error) {
	if len(u.stack) == 0 || (len(u.marks) > 0 && len(u.stack) <= u.marks[len(u.marks)-1]) {
		return nil, errors.New("stack underflow")
	}
	v := u.stack[len(u.stack)-1]
	u.stack = u.stack[:len(u.stack)-1]
	return v, nil
}

func (u *unpickler) top() (any, error) {
	if len(u.stack) == 0 || (len(u.marks) > 0 && len(u.stack) <= u.marks[len(u.marks)-1]) {
		return nil, errors.New("stack underflow")
	}
	return u.stack[len(u.stack)-1], nil
}

// popMark pops everything above the last MARK.
func (u *unpickler) popMark() ([]any, error) {
	if len(u.marks) == 0 {
		return nil, errors.New("no mark on the stack")
	}
	m := u.marks[len(u.marks)-1]
	u.marks = u.marks[:len(u.marks)-1]
	items := append([]any(nil), u.stack[m:]...)
	u.stack = u.stack[:m]
	return items, nil
}

func (u *unpickler) popN(n int) ([]any, error) {
	out := make([]any, n)
	for i := n - 1; i >= 0; i-- {
		v, err := u.pop()
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (u *unpickler) memoPut(idx uint32) error {
	v, err := u.top()
	if err != nil {
		return err
	}
	if len(u.memo) >= maxPickleItems {
		return fmt.Errorf("memo of more than %d items: %w", maxPickleItems, ErrTooLarge)
	}
	u.memo[idx] = v
	return nil
}

func (u *unpickler) memoGet(idx uint64) error {
	v, ok := u.memo[uint32(idx)]
	if !ok || idx > math.MaxUint32 {
		return fmt.Errorf("memo key %d not defined", idx)
	}
	u.push(v)
	return nil
}

func (u *unpickler) global(module, name string) error {
	if !allowedGlobal(module, name) {
		return fmt.Errorf("refusing global %s.%s: only tensors can be loaded", module, name)
	}
	u.push(pyGlobal{module, name})
	return nil
}

func (u *unpickler) run() (any, error) {
	for {
		if len(u.stack) > maxPickleItems {
			return nil, fmt.Errorf("stack of more than %d items: %w", maxPickleItems, ErrTooLarge)
		}
		opb, err := u.read(1)
		if err != nil {
			return nil, err
		}
		op := opb[0]
		switch op {
		case 0x80: // PROTO
			p, err := u.read(1)
			if err != nil {
				return nil, err
			}
			if p[0] > 5 {
				return nil, fmt.Errorf("unsupported pickle protocol %d", p[0])
			}
		case 0x95: // FRAME: a length hint only
			if _, err := u.read(8); err != nil {
				return nil, err
			}
		case '.': // STOP
			if len(u.marks) != 0 {
				return nil, errors.New("STOP with an open MARK")
			}
			v, err := u.pop()
			if err != nil {
				return nil, err
			}
			return v, nil
		case '(': // MARK
			u.marks = append(u.marks, len(u.stack))
		case '0': // POP
			if _, err := u.pop(); err != nil {
				return nil, err
			}
		case '1': // POP_MARK
			if _, err := u.popMark(); err != nil {
				return nil, err
			}
		case '2': // DUP
			v, err := u.top()
			if err != nil {
				return nil, err
			}
			u.push(v)
		case 'N': // NONE
			u.push(nil)
		case 0x88: // NEWTRUE
			u.push(true)
		case 0x89: // NEWFALSE
			u.push(false)
		case 'J': // BININT
			v, err := u.uint(4)
			if err != nil {
				return nil, err
			}
			u.push(int64(int32(uint32(v))))
		case 'K': // BININT1
			v, err := u.uint(1)
			if err != nil {
				return nil, err
			}
			u.push(int64(v))
		case 'M': // BININT2
			v, err := u.uint(2)
			if err != nil {
				return nil, err
			}
			u.push(int64(v))
		case 0x8a: // LONG1
			n, err := u.uint(1)
			if err != nil {
				return nil, err
			}
			b, err := u.read(int(n))
			if err != nil {
				return nil, err
			}
			if n > 8 {
				return nil, fmt.Errorf("LONG1 of %d bytes does not fit int64", n)
			}
			var v uint64
			for i := int(n) - 1; i >= 0; i-- {
				v = v<<8 | uint64(b[i])
			}
			if n > 0 && n < 8 && b[n-1]&0x80 != 0 { // sign-extend
				v |= ^uint64(0) << (8 * n)
			}
			u.push(int64(v))
		case 'G': // BINFLOAT (big-endian)
			b, err := u.read(8)
			if err != nil {
				return nil, err
			}
			u.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
		case 'X', 0x8c, 0x8d: // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
			size := map[byte]int{'X': 4, 0x8c: 1, 0x8d: 8}[op]
			n, err := u.uint(size)
			if err != nil {
				return nil, err
			}
			if n > uint64(len(u.data)) {
				return nil, errTruncated
			}
			b, err := u.read(int(n))
			if err != nil {
				return nil, err
			}
			u.push(string(b))
		case 'B', 'C', 0x8e: // BINBYTES, SHORT_BINBYTES, BINBYTES8
			size := map[byte]int{'B': 4, 'C': 1, 0x8e: 8}[op]
			n, err := u.uint(size)
			if err != nil {
				return nil, err
			}
			if n > uint64(len(u.data)) {
				return nil, errTruncated
			}
			b, err := u.read(int(n))
			if err != nil {
				return nil, err
			}
			u.push(append([]byte(nil), b...))
		case '}': // EMPTY_DICT
			u.push(newDict())
		case ']': // EMPTY_LIST
			u.push(&pyList{})
		case ')': // EMPTY_TUPLE
			u.push(pyTuple{})
		case 't': // TUPLE
			items, err := u.popMark()
			if err != nil {
				return nil, err
			}
			u.push(pyTuple(items))
		case 0x85, 0x86, 0x87: // TUPLE1, TUPLE2, TUPLE3
			items, err := u.popN(int(op - 0x84))
			if err != nil {
				return nil, err
			}
			u.push(pyTuple(items))
		case 'l': // LIST
			items, err := u.popMark()
			if err != nil {
				return nil, err
			}
			u.push(&pyList{items: items})
		case 'd': // DICT
			items, err := u.popMark()
			if err != nil {
				return nil, err
			}
			d := newDict()
			if err := setItems(d, items); err != nil {
				return nil, err
			}
			u.push(d)
		case 's': // SETITEM
			kv, err := u.popN(2)
			if err != nil {
				return nil, err
			}
			if err := u.setItemsOnTop(kv); err != nil {
				return nil, err
			}
		case 'u': // SETITEMS
			items, err := u.popMark()
			if err != nil {
				return nil, err
			}
			if err := u.setItemsOnTop(items); err != nil {
				return nil, err
			}
		case 'a', 'e': // APPEND, APPENDS
			var items []any
			if op == 'a' {
				items, err = u.popN(1)
			} else {
				items, err = u.popMark()
			}
			if err != nil {
				return nil, err
			}
			t, err := u.top()
			if err != nil {
				return nil, err
			}
			l, ok := t.(*pyList)
			if !ok {
				return nil, fmt.Errorf("append to %T, not a list", t)
			}
			l.items = append(l.items, items...)
		case 'q', 'r': // BINPUT, LONG_BINPUT
			n := 1
			if op == 'r' {
				n = 4
			}
			idx, err := u.uint(n)
			if err != nil {
				return nil, err
			}
			if err := u.memoPut(uint32(idx)); err != nil {
				return nil, err
			}
		case 0x94: // MEMOIZE
			if err := u.memoPut(uint32(len(u.memo))); err != nil {
				return nil, err
			}
		case 'h', 'j': // BINGET, LONG_BINGET
			n := 1
			if op == 'j' {
				n = 4
			}
			idx, err := u.uint(n)
			if err != nil {
				return nil, err
			}
			if err := u.memoGet(idx); err != nil {
				return nil, err
			}
		case 'c': // GLOBAL
			module, err := u.readLine()
			if err != nil {
				return nil, err
			}
			name, err := u.readLine()
			if err != nil {
				return nil, err
			}
			if err := u.global(module, name); err != nil {
				return nil, err
			}
		case 0x93: // STACK_GLOBAL
			mn, err := u.popN(2)
			if err != nil {
				return nil, err
			}
			module, ok1 := mn[0].(string)
			name, ok2 := mn[1].(string)
			if !ok1 || !ok2 {
				return nil, errors.New("STACK_GLOBAL needs two strings")
			}
			if err := u.global(module, name); err != nil {
				return nil, err
			}
		case 'Q': // BINPERSID
			pid, err := u.pop()
			if err != nil {
				return nil, err
			}
			s, err := persistentLoad(pid)
			if err != nil {
				return nil, err
			}
			u.push(s)
		case 'R': // REDUCE
			fa, err := u.popN(2)
			if err != nil {
				return nil, err
			}
			args, ok := fa[1].(pyTuple)
			if !ok {
				return nil, fmt.Errorf("REDUCE arguments are %T, not a tuple", fa[1])
			}
			v, err := call(fa[0], args)
			if err != nil {
				return nil, err
			}
			u.push(v)
		case 'b': // BUILD: state of OrderedDicts and parameters is ignored
			if _, err := u.pop(); err != nil {
				return nil, err
			}
			t, err := u.top()
			if err != nil {
				return nil, err
			}
			switch t.(type) {
			case *pyDict, *torchTensor:
			default:
				return nil, fmt.Errorf("BUILD on %T", t)
			}
		default:
			return nil, fmt.Errorf("unsupported pickle opcode 0x%02x", op)
		}
	}
}

func (u *unpickler) setItemsOnTop(items []any) error {
	t, err := u.top()
	if err != nil {
		return err
	}
	d, ok := t.(*pyDict)
	if !ok {
		return fmt.Errorf("setitem on %T, not a dict", t)
	}
	return setItems(d, items)
}

func setItems(d *pyDict, items []any) error {
	if len(items)%2 != 0 {
		return errors.New("odd number of dict items")
	}
	for i := 0; i < len(items); i += 2 {
		if err := d.set(items[i], items[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// persistentLoad turns ('storage', storage_type, key, location, numel) into a
// storage reference.
func persistentLoad(pid any) (*storageRef, error) {
	t, ok := pid.(pyTuple)
	if !ok || len(t) != 5 {
		return nil, fmt.Errorf("persistent id %v is not a 5-tuple", describe(pid))
	}
	if s, _ := t[0].(string); s != "storage" {
		return nil, fmt.Errorf("persistent id of kind %v, not storage", describe(t[0]))
	}
	g, ok := t[1].(pyGlobal)
	if !ok || g.module != "torch" {
		return nil, fmt.Errorf("storage type %v is not a torch storage", describe(t[1]))
	}
	dt, ok := storageTypes[g.name]
	if !ok {
		return nil, fmt.Errorf("unsupported storage type %s", g)
	}
	key, ok := t[2].(string)
	if !ok {
		return nil, fmt.Errorf("storage key %v is not a string", describe(t[2]))
	}
	n, ok := t[4].(int64)
	if !ok || n < 0 {
		return nil, fmt.Errorf("storage size %v is not a non-negative integer", describe(t[4]))
	}
	return &storageRef{dtype: dt, key: key, numel: n}, nil
}

// call applies an allowed global to its arguments.
func call(f any, args pyTuple) (any, error) {
	g, ok := f.(pyGlobal)
	if !ok {
		return nil, fmt.Errorf("REDUCE on %T, not a global", f)
	}
	switch g.String() {
	case "collections.OrderedDict":
		if len(args) != 0 {
			return nil, errors.New("OrderedDict with arguments")
		}
		return newDict(), nil
	case "torch._utils._rebuild_parameter":
		if len(args) < 1 {
			return nil, errors.New("_rebuild_parameter without arguments")
		}
		t, ok := args[0].(*torchTensor)
		if !ok {
			return nil, fmt.Errorf("_rebuild_parameter of %T, not a tensor", args[0])
		}
		return t, nil
	case "torch._utils._rebuild_tensor_v2":
		return rebuildTensor(args)
	}
	return nil, fmt.Errorf("global %s cannot be called", g)
}

// rebuildTensor handles _rebuild_tensor_v2(storage, storage_offset, size,
// stride, requires_grad, backward_hooks[, metadata]).
func rebuildTensor(args pyTuple) (*torchTensor, error) {
	if len(args) < 4 {
		return nil, fmt.Errorf("_rebuild_tensor_v2 with %d arguments", len(args))
	}
	s, ok := args[0].(*storageRef)
	if !ok {
		return nil, fmt.Errorf("_rebuild_tensor_v2 storage is %T", args[0])
	}
	off, ok := args[1].(int64)
	if !ok || off < 0 {
		return nil, fmt.Errorf("storage offset %v is not a non-negative integer", describe(args[1]))
	}
	size, err := intTuple(args[2])
	if err != nil {
		return nil, fmt.Errorf("tensor size: %w", err)
	}
	stride, err := intTuple(args[3])
	if err != nil {
		return nil, fmt.Errorf("tensor stride: %w", err)
	}
	if len(size) != len(stride) {
		return nil, fmt.Errorf("size %v and stride %v differ in rank", size, stride)
	}
	t := &torchTensor{storage: s, offset: off, size: make([]int, len(size)), stride: stride}
	for i, d := range size {
		if d > math.MaxInt32 {
			return nil, fmt.Errorf("dimension %d too large", d)
		}
		t.size[i] = int(d)
	}
	if err := t.checkBounds(); err != nil {
		return nil, err
	}
	return t, nil
}

func intTuple(v any) ([]int64, error) {
	t, ok := v.(pyTuple)
	if !ok {
		return nil, fmt.Errorf("%v is not a tuple", describe(v))
	}
	out := make([]int64, len(t))
	for i, x := range t {
		n, ok := x.(int64)
		if !ok || n < 0 {
			return nil, fmt.Errorf("%v is not a non-negative integer", describe(x))
		}
		out[i] = n
	}
	return out, nil
}

// checkBounds verifies every element lies inside the storage.
func (t *torchTensor) checkBounds() error {
	n, err := numel(t.size)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if n > t.storage.numel {
		return fmt.Errorf("tensor of size %v has more elements than its storage of %d (overlapping views are not supported)", t.size, t.storage.numel)
	}
	last := t.offset
	for i, d := range t.size {
		step := int64(d-1) * t.stride[i]
		if t.stride[i] != 0 && step/t.stride[i] != int64(d-1) || last > math.MaxInt64-step {
			return errors.New("tensor extent overflows")
		}
		last += step
	}
	if last >= t.storage.numel {
		return fmt.Errorf("tensor of size %v, stride %v at offset %d reaches element %d of a storage of %d", t.size, t.stride, t.offset, last, t.storage.numel)
	}
	return nil
}

// describe renders a pickle value for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		return fmt.Sprintf("%q", x)
	case pyGlobal:
		return x.String()
	case int64, float64, bool:
		return fmt.Sprint(x)
	}
	return fmt.Sprintf("%T", v)
}
