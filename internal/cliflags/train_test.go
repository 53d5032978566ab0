package cliflags

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssdgnn/ssdgnn/featurecache"
	"github.com/ssdgnn/ssdgnn/sample"
	"github.com/ssdgnn/ssdgnn/storage"
	"github.com/ssdgnn/ssdgnn/train"
)

// TestParseTrain: train's argument lists parse to the options the
// command trains with, and values the flags alone can refuse are refused
// naming the flag.
func TestParseTrain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, tf *Train, o *train.Options)
		err   string
	}{
		{name: "defaults", args: []string{"d"}, check: func(t *testing.T, tf *Train, o *train.Options) {
			if !slices.Equal(o.Fanouts, []int{10, 10}) || o.Layers != train.DefaultLayers || o.Selection != sample.ModeAuto ||
				o.FeatRead != storage.ReadAuto || tf.Source != "auto" || o.Seed != 1 || o.InFlight != 0 {
				t.Errorf("defaults: %+v (source %q)", o, tf.Source)
			}
			if o.FeatCacheBytes != 0 || o.HistCacheBytes != 0 || o.NeighborCacheBytes != 0 {
				t.Errorf("caches %d %d %d, want 0 (the plan's)", o.FeatCacheBytes, o.HistCacheBytes, o.NeighborCacheBytes)
			}
			if o.CheckpointDir != filepath.Join("d", "checkpoints") {
				t.Errorf("checkpoint dir %q", o.CheckpointDir)
			}
			if o.CheckpointInterval != train.DefaultCheckpointInterval {
				t.Errorf("checkpoint interval %v, want %v", o.CheckpointInterval, train.DefaultCheckpointInterval)
			}
		}},
		{name: "checkpoint interval off", args: strings.Fields("d --checkpoint-interval 0"), check: func(t *testing.T, tf *Train, o *train.Options) {
			if o.CheckpointInterval >= 0 {
				t.Errorf("checkpoint interval %v, want negative (never by time; train's zero is its default)", o.CheckpointInterval)
			}
		}},
		{name: "checkpoint interval", args: strings.Fields("d --checkpoint-interval 90s"), check: func(t *testing.T, tf *Train, o *train.Options) {
			if o.CheckpointInterval != 90*time.Second {
				t.Errorf("checkpoint interval %v, want 1m30s", o.CheckpointInterval)
			}
		}},
		{name: "negative checkpoint interval", args: strings.Fields("d --checkpoint-interval -1s"), err: "--checkpoint-interval -1s"},
		{name: "bench child", args: strings.Fields("train-dir --model sage --layers 3 --hidden 32 --epochs 1 --batch-size 1000 --fanouts 10,10,10 --seed 7 --json -q -v --metrics m.jsonl --selection partition --partition ooc --feat-read direct --in-flight 1 --source batch"),
			check: func(t *testing.T, tf *Train, o *train.Options) {
				if o.Model != train.ModelSAGE || o.Layers != 3 || o.Hidden != 32 || o.BatchSize != 1000 || !slices.Equal(o.Fanouts, []int{10, 10, 10}) ||
					o.Seed != 7 || o.Selection != sample.ModePartition || tf.Partition != "ooc" || o.FeatRead != storage.ReadDirect || o.InFlight != 1 ||
					tf.Source != "batch" || !tf.JSON || tf.Metrics != "m.jsonl" {
					t.Errorf("bench child: %+v (partition %q, source %q)", o, tf.Partition, tf.Source)
				}
			}},
		{name: "explicit zeros", args: strings.Fields("d --feat-cache 0 --hist-cache 0 --neighbor-cache 1MiB --dropout 0 --weight-decay 0 --coalesce-gap 0"),
			check: func(t *testing.T, tf *Train, o *train.Options) {
				if o.FeatCacheBytes != -1 || o.HistCacheBytes != -1 || o.NeighborCacheBytes != 1<<20 {
					t.Errorf("caches %d %d %d, want -1 -1 %d", o.FeatCacheBytes, o.HistCacheBytes, o.NeighborCacheBytes, 1<<20)
				}
				if o.Dropout != -1 || o.WeightDecay != -1 || o.FeatCoalesceGap != featurecache.PerRowReads {
					t.Errorf("dropout %v, weight decay %v, gap %d: want the explicit zeros' meanings", o.Dropout, o.WeightDecay, o.FeatCoalesceGap)
				}
			}},
		{name: "layers sets fanouts", args: strings.Fields("d --layers 3"), check: func(t *testing.T, tf *Train, o *train.Options) {
			if !slices.Equal(o.Fanouts, []int{10, 10, 10}) {
				t.Errorf("fanouts %v", o.Fanouts)
			}
		}},
		{name: "zero epochs", args: strings.Fields("d --epochs 0"), err: "--epochs 0"},
		// histcache reads PGrad 0 as its default, 0.9: --pgrad 0
		// admitted 90 %.
		{name: "zero eval-mem", args: strings.Fields("d --eval-mem 0"), err: "--eval-mem 0: want a positive value"},
		{name: "zero mem-limit", args: strings.Fields("d --mem-limit 0"), err: "--mem-limit 0: want a positive value"},
		{name: "zero pgrad", args: strings.Fields("d --hist-policy grad --pgrad 0"), err: "--pgrad 0: want a positive value (omit the flag for the default, 0.9)"},
		{name: "bad fanouts", args: strings.Fields("d --fanouts 10,x"), err: "--fanouts"},
		{name: "bad dropout", args: strings.Fields("d --dropout 1"), err: "--dropout"},
		{name: "NaN dropout", args: strings.Fields("d --dropout NaN"), err: "--dropout NaN: want a probability in [0, 1)"},
		{name: "NaN lr", args: strings.Fields("d --lr NaN"), err: "--lr NaN"},
		{name: "infinite lr", args: strings.Fields("d --lr Inf"), err: "--lr +Inf"},
		{name: "negative weight decay", args: strings.Fields("d --weight-decay -1"), err: "--weight-decay -1"},
		{name: "NaN weight decay", args: strings.Fields("d --weight-decay NaN"), err: "--weight-decay NaN"},
		{name: "bad source", args: strings.Fields("d --source nope"), err: "nope"},
		{name: "bad size", args: strings.Fields("d --mem 2EiB"), err: "beyond the largest"},
		// Flags another flag makes meaningless, once taken and ignored.
		{name: "pgrad under staleness", args: strings.Fields("d --pgrad 0.5"), err: "--pgrad has no effect with --hist-policy staleness"},
		{name: "history flags, one layer", args: strings.Fields("d --layers 1 --staleness 5"), err: "--staleness has no effect with --layers 1"},
		{name: "eval-mem, sampled", args: strings.Fields("d --eval sampled --eval-mem 10MiB"), err: "--eval-mem has no effect with --eval sampled"},
		{name: "scan-batches, not streamed", args: strings.Fields("d --stream-input off --scan-batches 1"), err: "--scan-batches has no effect with --stream-input off"},
		{name: "reprofile with a plan", args: strings.Fields("d --plan p.json --reprofile"), err: "--reprofile has no effect with --plan"},
		{name: "profile-name with a plan", args: strings.Fields("d --plan p.json --profile-name x"), err: "--profile-name has no effect with --plan"},
		{name: "where they apply", args: strings.Fields("d --hist-policy grad --pgrad 0.5 --layers 3 --staleness 5 --eval-mem 10MiB --stream-input on --scan-batches 1 --mem 1GiB --reprofile"),
			check: func(t *testing.T, tf *Train, o *train.Options) {}},
		{name: "no dir", args: strings.Fields("--epochs 1"), err: "want one DIR"},
		{name: "unknown flag", args: strings.Fields("d --no-such-flag"), err: "no-such-flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tf, dir, err := ParseTrain(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if dir != tc.args[0] {
				t.Errorf("dir %q, want %q", dir, tc.args[0])
			}
			tc.check(t, tf, &tf.Options)
		})
	}
}

// TestByteSize: units in powers of 1000 and 1024, whole byte counts only,
// and the upper bound.
func TestByteSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64 // -1: an error
	}{
		{"512MiB", 512 << 20}, {"4GB", 4e9}, {"256M", 256e6}, {"1.5GiB", 3 << 29}, {"4096", 4096}, {"4096B", 4096},
		{"1.9B", -1}, {"0.5", -1}, {"lots", -1}, {"-5MiB", -1}, {"9EiB", -1},
	} {
		var b ByteSize
		err := b.Set(c.in)
		switch {
		case c.want < 0 && err == nil:
			t.Errorf("%q: accepted as %d", c.in, b)
		case c.want >= 0 && (err != nil || int64(b) != c.want):
			t.Errorf("%q: %d, %v; want %d", c.in, b, err, c.want)
		}
	}
}
