package tokenizer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// A reader for SentencePiece's ModelProto (sentencepiece_model.proto),
// the spm.model / sentencepiece.bpe.model files that model folders ship
// instead of a tokenizer.json, decoded from the protobuf wire format by
// hand (docs/DESIGN.md, the SentencePiece subsection of the tokenizer
// chapter). Only the fields the conversion reads are kept; the others
// (the trainer's settings, the self-test data, the denormalizer) are
// skipped after their wire format is checked.

// SentencePiece piece types (ModelProto.SentencePiece.Type).
const (
	spmNormal      = 1
	spmUnknown     = 2
	spmControl     = 3
	spmUserDefined = 4
	spmUnused      = 5
	spmByte        = 6
)

// Limits of the reader: far above real models (XLM-R's 250,002 pieces,
// DeBERTa-v3's 128,000) and their longest pieces.
const (
	maxSPMPieces    = 1 << 22
	maxSPMPieceSize = 1 << 16
)

type spmPiece struct {
	piece string
	score float32
	typ   int32
}

// spmModel is what the conversion reads of a ModelProto, with the
// proto's defaults where a field is absent.
type spmModel struct {
	pieces []spmPiece
	// trainer_spec
	modelType                  int32 // 1 unigram, 2 BPE, 3 word, 4 char
	unkID, bosID, eosID, padID int32
	unkPiece                   string
	byteFallback               bool
	// normalizer_spec
	normName                                    string
	charsmap                                    []byte
	addDummyPrefix, removeExtraWS, escapeWSpace bool
}

// protoReader walks one protobuf message.
type protoReader struct {
	b   []byte
	off int
}

var errTruncated = errors.New("truncated")

func (r *protoReader) varint() (uint64, error) {
	v, n := binary.Uvarint(r.b[r.off:])
	if n == 0 {
		return 0, errTruncated
	}
	if n < 0 {
		return 0, errors.New("varint overflows 64 bits")
	}
	r.off += n
	return v, nil
}

// next returns the next field's number and wire type; for wire type 2
// also its bytes, for 0 its value, for 1 and 5 their bits.
func (r *protoReader) next() (num int, wire int, val uint64, data []byte, err error) {
	key, err := r.varint()
	if err != nil {
		return 0, 0, 0, nil, fmt.Errorf("field key at byte %d: %w", r.off, err)
	}
	if key>>3 == 0 || key>>3 > math.MaxInt32 {
		return 0, 0, 0, nil, fmt.Errorf("field number %d at byte %d", key>>3, r.off)
	}
	num, wire = int(key>>3), int(key&7)
	switch wire {
	case 0:
		val, err = r.varint()
	case 1:
		if len(r.b)-r.off < 8 {
			return 0, 0, 0, nil, fmt.Errorf("field %d: %w", num, errTruncated)
		}
		val = binary.LittleEndian.Uint64(r.b[r.off:])
		r.off += 8
	case 5:
		if len(r.b)-r.off < 4 {
			return 0, 0, 0, nil, fmt.Errorf("field %d: %w", num, errTruncated)
		}
		val = uint64(binary.LittleEndian.Uint32(r.b[r.off:]))
		r.off += 4
	case 2:
		var n uint64
		n, err = r.varint()
		if err == nil && n > uint64(len(r.b)-r.off) {
			err = fmt.Errorf("length %d past the end (%d bytes left)", n, len(r.b)-r.off)
		}
		if err == nil {
			data = r.b[r.off : r.off+int(n)]
			r.off += int(n)
		}
	default:
		return 0, 0, 0, nil, fmt.Errorf("field %d: wire type %d is not supported", num, wire)
	}
	if err != nil {
		return 0, 0, 0, nil, fmt.Errorf("field %d: %w", num, err)
	}
	return num, wire, val, data, nil
}

func (r *protoReader) done() bool { return r.off >= len(r.b) }

// wantWire checks a known field's wire type.
func wantWire(msg string, num, have, want int) error {
	if have != want {
		return fmt.Errorf("%s field %d: wire type %d, want %d", msg, num, have, want)
	}
	return nil
}

// parseSPM decodes a ModelProto.
func parseSPM(b []byte) (*spmModel, error) {
	if int64(len(b)) > MaxFileSize {
		return nil, fmt.Errorf("sentencepiece model: %d bytes, over the %d-byte limit: %w", len(b), MaxFileSize, ErrTooLarge)
	}
	m := &spmModel{modelType: 1, unkID: 0, bosID: 1, eosID: 2, padID: -1, unkPiece: "<unk>",
		addDummyPrefix: true, removeExtraWS: true, escapeWSpace: true}
	r := &protoReader{b: b}
	for !r.done() {
		num, wire, _, data, err := r.next()
		if err != nil {
			return nil, fmt.Errorf("ModelProto: %w", err)
		}
		switch num {
		case 1:
			if err := wantWire("ModelProto", num, wire, 2); err != nil {
				return nil, err
			}
			if len(m.pieces) >= maxSPMPieces {
				return nil, fmt.Errorf("ModelProto: more than %d pieces: %w", maxSPMPieces, ErrTooLarge)
			}
			p, err := parseSPMPiece(data)
			if err != nil {
				return nil, fmt.Errorf("ModelProto: pieces[%d]: %w", len(m.pieces), err)
			}
			m.pieces = append(m.pieces, p)
		case 2:
			if err := wantWire("ModelProto", num, wire, 2); err != nil {
				return nil, err
			}
			if err := m.parseTrainer(data); err != nil {
				return nil, fmt.Errorf("ModelProto: trainer_spec: %w", err)
			}
		case 3:
			if err := wantWire("ModelProto", num, wire, 2); err != nil {
				return nil, err
			}
			if err := m.parseNormalizer(data); err != nil {
				return nil, fmt.Errorf("ModelProto: normalizer_spec: %w", err)
			}
		}
	}
	return m, nil
}

func parseSPMPiece(b []byte) (spmPiece, error) {
	p := spmPiece{typ: spmNormal}
	seen := false
	r := &protoReader{b: b}
	for !r.done() {
		num, wire, val, data, err := r.next()
		if err != nil {
			return p, err
		}
		switch num {
		case 1:
			if err := wantWire("SentencePiece", num, wire, 2); err != nil {
				return p, err
			}
			if len(data) > maxSPMPieceSize {
				return p, fmt.Errorf("piece of %d bytes, over the %d-byte limit: %w", len(data), maxSPMPieceSize, ErrTooLarge)
			}
			if !utf8.Valid(data) {
				return p, fmt.Errorf("piece %q is not valid UTF-8", data)
			}
			p.piece, seen = string(data), true
		case 2:
			if err := wantWire("SentencePiece", num, wire, 5); err != nil {
				return p, err
			}
			p.score = math.Float32frombits(uint32(val))
			if math.IsNaN(float64(p.score)) || math.IsInf(float64(p.score), 0) {
				return p, fmt.Errorf("score %v is not finite", p.score)
			}
		case 3:
			if err := wantWire("SentencePiece", num, wire, 0); err != nil {
				return p, err
			}
			if val < spmNormal || val > spmByte {
				return p, fmt.Errorf("type %d is not a SentencePiece type (1 to 6)", val)
			}
			p.typ = int32(val)
		}
	}
	if !seen || p.piece == "" {
		return p, errors.New("piece: missing or empty")
	}
	return p, nil
}

// int32Field is a protobuf int32 varint: negative values are sign
// extended to 64 bits.
func int32Field(v uint64) (int32, error) {
	if int64(v) < math.MinInt32 || int64(v) > math.MaxInt32 {
		return 0, fmt.Errorf("%d is out of the int32 range", int64(v))
	}
	return int32(int64(v)), nil
}

func (m *spmModel) parseTrainer(b []byte) error {
	r := &protoReader{b: b}
	for !r.done() {
		num, wire, val, data, err := r.next()
		if err != nil {
			return err
		}
		var dst *int32
		switch num {
		case 3:
			dst = &m.modelType
		case 40:
			dst = &m.unkID
		case 41:
			dst = &m.bosID
		case 42:
			dst = &m.eosID
		case 43:
			dst = &m.padID
		case 35:
			if err := wantWire("TrainerSpec", num, wire, 0); err != nil {
				return err
			}
			m.byteFallback = val != 0
		case 45:
			if err := wantWire("TrainerSpec", num, wire, 2); err != nil {
				return err
			}
			if !utf8.Valid(data) || len(data) > maxSPMPieceSize {
				return fmt.Errorf("unk_piece: not valid UTF-8 or too long")
			}
			m.unkPiece = string(data)
		}
		if dst != nil {
			if err := wantWire("TrainerSpec", num, wire, 0); err != nil {
				return err
			}
			if *dst, err = int32Field(val); err != nil {
				return fmt.Errorf("field %d: %w", num, err)
			}
		}
	}
	return nil
}

func (m *spmModel) parseNormalizer(b []byte) error {
	r := &protoReader{b: b}
	for !r.done() {
		num, wire, val, data, err := r.next()
		if err != nil {
			return err
		}
		switch num {
		case 1:
			if err := wantWire("NormalizerSpec", num, wire, 2); err != nil {
				return err
			}
			if !utf8.Valid(data) || len(data) > maxSPMPieceSize {
				return errors.New("name: not valid UTF-8 or too long")
			}
			m.normName = string(data)
		case 2:
			if err := wantWire("NormalizerSpec", num, wire, 2); err != nil {
				return err
			}
			m.charsmap = data
		case 3, 4, 5:
			if err := wantWire("NormalizerSpec", num, wire, 0); err != nil {
				return err
			}
			*[]*bool{&m.addDummyPrefix, &m.removeExtraWS, &m.escapeWSpace}[num-3] = val != 0
		}
	}
	return nil
}
