package serve

import (
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/int8bert/int8bert/internal/cgroup"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
)

// modelInfo is one model in /info.
type modelInfo struct {
	Name           string            `json:"name"`
	Source         string            `json:"source"`
	Family         string            `json:"family"`
	Task           string            `json:"task"`
	Precision      string            `json:"precision"`
	MaxInputLength int               `json:"max_input_length"`
	Hidden         int               `json:"hidden_size"`
	Pooling        string            `json:"pooling"`
	PoolingFrom    string            `json:"pooling_from"`
	ID2Label       map[string]string `json:"id2label,omitempty"`
	Label2ID       map[string]int    `json:"label2id,omitempty"`
	Kernels        string            `json:"kernels"`
	// Resident is the model's memory by kind (ours; TEI has none).
	Resident models.ResidentBytes `json:"resident_bytes"`
	// Routes are the POST routes that answer this model (ours; bench
	// serve's mixed load reads them, docs/DESIGN.md section 9.4), and
	// MaskToken the text of its mask token where /fill-mask answers it.
	Routes    []string `json:"routes"`
	MaskToken string   `json:"mask_token,omitempty"`
}

// infoBody is /info: TEI's fields for the default model first, then
// ours.
type infoBody struct {
	ModelID               string         `json:"model_id"`
	ModelSHA              *string        `json:"model_sha"` // the hub commit; null for a folder
	ModelDType            string         `json:"model_dtype"`
	ServedModelName       string         `json:"served_model_name"`
	ModelType             map[string]any `json:"model_type"`
	MaxConcurrentRequests int            `json:"max_concurrent_requests"`
	MaxInputLength        int            `json:"max_input_length"`
	MaxBatchTokens        int            `json:"max_batch_tokens"`
	MaxBatchRequests      *int           `json:"max_batch_requests"` // null: no bound, as TEI's default
	MaxClientBatchSize    int            `json:"max_client_batch_size"`
	AutoTruncate          bool           `json:"auto_truncate"`
	TokenizationWorkers   int            `json:"tokenization_workers"`
	Version               string         `json:"version"`
	SHA                   *string        `json:"sha"`
	DockerLabel           *string        `json:"docker_label"`

	Models             []modelInfo       `json:"models"`
	Instances          int               `json:"instances"`
	ThreadsPerInstance int               `json:"threads_per_instance"`
	Pinned             [][]int           `json:"pinned_cpus,omitempty"`
	BatchWindow        string            `json:"batch_window"`
	CPU                selector.Int8Tier `json:"int8_tier"`
	NumCPU             int               `json:"num_cpu"`
	// Resources are the container's limits and what was derived from
	// them, with where each came from (docs/DESIGN.md section 9.10).
	Resources cgroup.Resources `json:"resources"`
	// PassTokens is the token budget of one forward pass and
	// PassTokensFrom where it came from (a memory limit may lower it).
	PassTokens     int    `json:"pass_tokens"`
	PassTokensFrom string `json:"pass_tokens_from"`
	// MaxQueuedPasses and AdmittedTokens are the bound on the work
	// admitted (docs/DESIGN.md section 9.11): AdmittedTokens =
	// MaxQueuedPasses x instances x pass tokens, 0 for no bound.
	MaxQueuedPasses int    `json:"max_queued_passes"`
	AdmittedTokens  int    `json:"admitted_tokens"`
	GoVersion       string `json:"go_version"`
	Uptime          string `json:"uptime"`
	Draining        bool   `json:"draining"`
}

// Version is the module version and VCS revision of the running binary.
func Version() (version, revision string) {
	version = "devel"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, ""
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		version = v
	}
	for _, st := range bi.Settings {
		if st.Key == "vcs.revision" {
			revision = st.Value
		}
	}
	return version, revision
}

func (s *Server) infoBody() infoBody {
	def := s.models[0]
	ver, rev := Version()
	b := infoBody{ModelID: def.source, ModelDType: def.p.Precision().String(), ServedModelName: def.name,
		MaxConcurrentRequests: s.cfg.MaxConcurrentRequests, MaxInputLength: def.p.MaxLength(),
		MaxBatchTokens:     s.cfg.MaxBatchTokens,
		MaxClientBatchSize: s.cfg.MaxClientBatchSize, AutoTruncate: s.cfg.AutoTruncate,
		TokenizationWorkers: s.cfg.TokenizationWorkers, Version: ver,
		Instances: s.inst.Len(), ThreadsPerInstance: s.inst.Threads(), BatchWindow: s.cfg.BatchWindow.String(),
		NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), Uptime: time.Since(s.started).Round(time.Second).String(),
		Draining: s.draining.Load(), Resources: s.cfg.Resources, PassTokens: s.passTokens, PassTokensFrom: s.passFrom,
		MaxQueuedPasses: s.cfg.MaxQueuedPasses, AdmittedTokens: s.sched.admit}
	if n := s.cfg.MaxBatchRequests; n >= 0 {
		b.MaxBatchRequests = &n
	}
	if rev != "" {
		b.SHA = &rev
	}
	if sha := snapshotCommit(def.p.Dir()); sha != "" {
		b.ModelSHA = &sha
	}
	if l := os.Getenv("DOCKER_LABEL"); l != "" { // the image sets it, as TEI's build does
		b.DockerLabel = &l
	}
	for i := 0; i < s.inst.Len(); i++ {
		if c := s.inst.Pinned(i); c != nil {
			b.Pinned = append(b.Pinned, c)
		}
	}
	switch id, label := def.id2label(); def.task() {
	case "classifier":
		b.ModelType = map[string]any{"classifier": map[string]any{"id2label": id, "label2id": label}}
	case "reranker":
		b.ModelType = map[string]any{"reranker": map[string]any{"id2label": id, "label2id": label}}
	case "question-answering":
		b.ModelType = map[string]any{"question_answering": map[string]any{}}
	default:
		b.ModelType = map[string]any{"embedding": map[string]any{"pooling": def.pool.String()}}
	}
	for _, m := range s.models {
		id, label := m.id2label()
		sel := m.p.Selector()
		b.CPU = selector.DescribeInt8(sel.Features())
		b.Models = append(b.Models, modelInfo{Name: m.name, Source: m.source, Family: m.p.FamilyDisplay(),
			Task: m.task(), Precision: m.p.Precision().String(), MaxInputLength: m.p.MaxLength(),
			Hidden: m.p.Config().Hidden, Pooling: m.pool.String(), PoolingFrom: m.poolFrom,
			ID2Label: id, Label2ID: label, Kernels: sel.ChosenU8S8(), Resident: m.p.ResidentBytes(),
			Routes: m.routes(), MaskToken: m.maskToken()})
	}
	return b
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, s.infoBody())
}

// snapshotCommit is the commit of a folder of the hub cache
// (.../snapshots/<commit>, checkpoint.Hub's layout), or "".
func snapshotCommit(dir string) string {
	base := filepath.Base(dir)
	if filepath.Base(filepath.Dir(dir)) != "snapshots" || len(base) != 40 {
		return ""
	}
	for _, c := range base {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return ""
		}
	}
	return base
}
