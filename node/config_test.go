package node

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/flakeid/flakeid/snowflake"
	"github.com/flakeid/flakeid/worker"
)

// stubCoordinator is a coordinator that Validate never calls.
type stubCoordinator struct{ worker.Coordinator }

func int64p(v int64) *int64 { return &v }

// TestValidate: every refusal wraps ErrInvalidConfig and names the value
// that was wrong; a coordinator or a static worker id alone passes.
func TestValidate(t *testing.T) {
	coord := stubCoordinator{}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // nil: valid
		is   error    // also wrapped, if not nil
	}{
		{"coordinator", Config{Coordinator: coord}, nil, nil},
		{"coordinator and settings", Config{Coordinator: coord, Lease: worker.Config{TTL: 20 * time.Second, WaitForFree: true},
			Settings: snowflake.Settings{DatacenterID: 31, Policy: snowflake.Borrow, MaxWait: time.Second}}, nil, nil},
		{"static worker", Config{StaticWorkerID: int64p(31), Settings: snowflake.Settings{DatacenterID: 31}}, nil, nil},
		{"static worker of a wide field", Config{StaticWorkerID: int64p(1000),
			Settings: snowflake.Settings{Layout: snowflake.Layout{DatacenterBits: 0, WorkerBits: 10, SequenceBits: 12}}}, nil, nil},

		{"nothing to lease from", Config{}, []string{"no Coordinator", "no StaticWorkerID"}, nil},
		{"coordinator and static worker", Config{Coordinator: coord, StaticWorkerID: int64p(3)}, []string{"StaticWorkerID 3", "not both"}, nil},
		{"lease settings with a static worker", Config{StaticWorkerID: int64p(3), Lease: worker.Config{TTL: 5 * time.Second}},
			[]string{"lease settings", "StaticWorkerID 3"}, nil},
		{"datacenter in the lease", Config{Coordinator: coord, Lease: worker.Config{Datacenter: 2}},
			[]string{"Lease.Datacenter 2", "Settings.DatacenterID"}, nil},
		{"workers in the lease", Config{Coordinator: coord, Lease: worker.Config{Workers: 8}},
			[]string{"Lease.Workers 8", "worker bits"}, nil},
		{"contract in the lease", Config{Coordinator: coord, Lease: worker.Config{Contract: "mine"}},
			[]string{`Lease.Contract "mine"`, "layout"}, nil},
		{"clock in the lease", Config{Coordinator: coord, Lease: worker.Config{Now: time.Now}},
			[]string{"Lease.Now", "Settings.Now"}, nil},
		{"logger in the lease", Config{Coordinator: coord, Lease: worker.Config{Logger: slog.Default()}},
			[]string{"Lease.Logger", "Config.Logger"}, nil},
		{"worker id in the settings", Config{Coordinator: coord, Settings: snowflake.Settings{WorkerID: 7}},
			[]string{"Settings.WorkerID 7", "from the lease"}, nil},
		{"not-before in the settings", Config{Coordinator: coord, Settings: snowflake.Settings{NotBefore: at}},
			[]string{"Settings.NotBefore 2030-01-02T03:04:05Z", "from the lease"}, nil},
		{"until in the settings", Config{Coordinator: coord, Settings: snowflake.Settings{Until: at}},
			[]string{"Settings.Until 2030-01-02T03:04:05Z", "from the lease"}, nil},
		{"datacenter beyond the field", Config{Coordinator: coord, Settings: snowflake.Settings{DatacenterID: 99}},
			[]string{"datacenter id 99, want 0–31 (5 datacenter bits)"}, snowflake.ErrNodeOutOfRange},
		{"negative datacenter", Config{Coordinator: coord, Settings: snowflake.Settings{DatacenterID: -1}},
			[]string{"datacenter id -1, want 0–31"}, snowflake.ErrNodeOutOfRange},
		{"datacenter without a field", Config{StaticWorkerID: int64p(0),
			Settings: snowflake.Settings{Layout: snowflake.Layout{WorkerBits: 16, SequenceBits: 8}, DatacenterID: 1}},
			[]string{"datacenter id 1, want 0–0 (0 datacenter bits)"}, snowflake.ErrNodeOutOfRange},
		{"static worker beyond the field", Config{StaticWorkerID: int64p(32)},
			[]string{"worker id 32, want 0–31 (5 worker bits)"}, snowflake.ErrNodeOutOfRange},
		{"negative static worker", Config{StaticWorkerID: int64p(-1)}, []string{"worker id -1"}, snowflake.ErrNodeOutOfRange},
		{"invalid layout", Config{Coordinator: coord, Settings: snowflake.Settings{Layout: snowflake.Layout{WorkerBits: 70}}},
			[]string{"worker bits = 70"}, snowflake.ErrInvalidLayout},
		{"layout overflows", Config{Coordinator: coord, Settings: snowflake.Settings{Layout: snowflake.Layout{TimeBits: 41, WorkerBits: 20, SequenceBits: 12}}},
			[]string{"overflows"}, snowflake.ErrInvalidLayout},
		{"max wait", Config{Coordinator: coord, Settings: snowflake.Settings{MaxWait: 2 * time.Minute}},
			[]string{"max wait 2m0s"}, snowflake.ErrInvalidSettings},
		{"lease TTL", Config{Coordinator: coord, Lease: worker.Config{TTL: 500 * time.Millisecond}},
			[]string{"TTL 500ms", "1s–10m"}, worker.ErrInvalidConfig},
		{"quarantine", Config{Coordinator: coord, Lease: worker.Config{Quarantine: time.Second}},
			[]string{"quarantine 1s"}, worker.ErrInvalidConfig},
		{"more worker ids than a coordinator leases", Config{Coordinator: coord,
			Settings: snowflake.Settings{Layout: snowflake.Layout{WorkerBits: 40, SequenceBits: 2, TimeUnit: time.Hour}}},
			[]string{"workers 1099511627776"}, worker.ErrInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate: %v, want ErrInvalidConfig", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Validate: %v, want it to wrap %v too", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestStartRefusesBeforeLeasing: a datacenter id beyond the layout's field
// is refused by Start before any worker id is leased or contract recorded.
func TestStartRefusesBeforeLeasing(t *testing.T) {
	coord := boltCoordinator(t, "")
	cfg := config(t, coord, 5, nil, 0)
	cfg.Settings.DatacenterID = 99
	n, err := Start(t.Context(), cfg)
	if err == nil {
		n.Close()
		t.Fatal("Start with datacenter 99 of 5 datacenter bits succeeded")
	}
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "datacenter id 99, want 0–31") {
		t.Fatalf("Start: %v, want ErrInvalidConfig naming datacenter id 99", err)
	}
	if infos, err := coord.List(t.Context(), 99); err != nil || len(infos) != 0 {
		t.Errorf("after the refusal datacenter 99 has slots %+v, %v; want none", infos, err)
	}
	if ns, ok, err := coord.Namespace(t.Context(), 99); err != nil || ok {
		t.Errorf("after the refusal datacenter 99 has a namespace %+v, %v; want none", ns, err)
	}
}

// TestNodeLeasesTheLayout: the node leases worker ids 0 … 2^WorkerBits − 1
// of its datacenter, under the layout's description as the contract.
func TestNodeLeasesTheLayout(t *testing.T) {
	coord := boltCoordinator(t, "")
	cfg := config(t, coord, 1, nil, 0) // two worker ids
	cfg.Settings.DatacenterID = 7
	var workers []int64
	for range 2 {
		n, err := Start(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		st := n.Status()
		if st.DatacenterID != 7 {
			t.Fatalf("status %+v, want datacenter 7", st)
		}
		workers = append(workers, st.WorkerID)
	}
	if workers[0] == workers[1] || min(workers[0], workers[1]) != 0 || max(workers[0], workers[1]) != 1 {
		t.Fatalf("worker ids %v, want 0 and 1", workers)
	}
	if n, err := Start(t.Context(), cfg); !errors.Is(err, worker.ErrExhausted) {
		if err == nil {
			n.Close()
		}
		t.Fatalf("a third node on 1 worker bit: %v, want ErrExhausted", err)
	}
	ns, ok, err := coord.Namespace(t.Context(), 7)
	if err != nil || !ok || !strings.Contains(ns.Contract, cfg.Settings.Layout.String()) {
		t.Fatalf("namespace %+v, %v, %v; want the contract to hold the layout %s", ns, ok, err, cfg.Settings.Layout)
	}
}

// TestStaticWorker: a static worker id is used as given, in the configured
// datacenter, without a coordinator.
func TestStaticWorker(t *testing.T) {
	n, err := Start(t.Context(), Config{StaticWorkerID: int64p(17), Settings: snowflake.Settings{DatacenterID: 2}, Logger: quiet(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	id, err := n.NextID()
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.Decode(id)
	if err != nil || p.Datacenter != 2 || p.Worker != 17 {
		t.Fatalf("ID %d decodes to %+v, %v; want datacenter 2, worker 17", id, p, err)
	}
	if st := n.Status(); !st.Held || st.DatacenterID != 2 || st.WorkerID != 17 {
		t.Fatalf("status %+v, want held, 2/17", st)
	}
}
