// CUDA C kernels of the ssdgnn CUDA backend (package kernels/cuda).
//
// Compiled to PTX with `make ptx` (nvcc -arch=compute_80 -ptx); the .ptx is
// committed and embedded with go:embed, and the driver JIT-compiles it for
// the device at New.
//
// Launch convention: gorgonia.org/cu's Function.Launch copies 8 bytes from
// behind every parameter pointer, so EVERY parameter here is 64 bits wide:
// pointers, `long long` for integers and `double` for floating-point scalars
// (converted to float inside the kernel; a float32 value survives the round
// trip through double exactly). Never add an `int` or `float` parameter.
//
// Determinism: no floating-point atomics anywhere. Every output element is
// written by exactly one thread, and every sum runs in a fixed order (CSR
// order, ascending row, or a fixed-shape tree). Integer atomics are used only
// for the error flag and duplicate detection, whose results do not depend on
// the order.
//
// Error flag: kernels that validate indices or labels set err[0] (an
// unsigned long long[2] device buffer) with atomicCAS to an op code if it is
// still 0, and atomicMin err[1] to the offending position. The backend reads
// it at sync points.

typedef long long ll;
typedef unsigned long long ull;

#define ERR_GATHER 1ULL
#define ERR_SCATTER 2ULL
#define ERR_LABEL 3ULL

__device__ __forceinline__ void set_err(ull* err, ull code, ll pos) {
    atomicCAS(err, 0ULL, code);
    atomicMin(err + 1, (ull)pos);
}

#define GRID_STRIDE(i, n) for (ll i = (ll)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (ll)blockDim.x * gridDim.x)

// ---------------------------------------------------------------- GEMM

// C(M×N) = alpha·op(A)·op(B) + beta·C. lda/ldb are the row strides of A and
// B as stored. With beta == 0 C is not read.

extern "C" __global__ void gemm_naive(const float* A, const float* B, float* C, ll M, ll N, ll K,
                                      ll lda, ll ldb, ll transA, ll transB, double alpha_d, double beta_d) {
    float alpha = (float)alpha_d, beta = (float)beta_d;
    GRID_STRIDE(t, M * N) {
        ll m = t / N, n = t % N;
        float acc = 0.f;
        for (ll k = 0; k < K; k++) {
            float a = transA ? A[k * lda + m] : A[m * lda + k];
            float b = transB ? B[n * ldb + k] : B[k * ldb + n];
            acc = fmaf(a, b, acc);
        }
        float v = alpha * acc;
        if (beta != 0.f) v = fmaf(beta, C[t], v);
        C[t] = v;
    }
}

#define TM 64
#define TN 64
#define TK 16

// Tiled GEMM: a 256-thread block computes a 64×64 tile of C, each thread a
// 4×4 micro-tile (rows ty+16i, cols tx+16j), staging 64×16 slices of op(A)
// and 16×64 slices of op(B) in shared memory. blockIdx.x walks M tiles and
// blockIdx.y N tiles. Every C element accumulates k in ascending order.
extern "C" __global__ void __launch_bounds__(256) gemm_tiled(const float* A, const float* B, float* C, ll M, ll N, ll K,
                                                             ll lda, ll ldb, ll transA, ll transB, double alpha_d, double beta_d) {
    __shared__ float As[TK][TM + 4];
    __shared__ float Bs[TK][TN + 4];
    float alpha = (float)alpha_d, beta = (float)beta_d;
    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;
    const ll m0 = (ll)blockIdx.x * TM, n0 = (ll)blockIdx.y * TN;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.f;

    for (ll k0 = 0; k0 < K; k0 += TK) {
#pragma unroll
        for (int l = tid; l < TM * TK; l += 256) {
            int mm, kk;
            if (transA) { mm = l % TM; kk = l / TM; } else { kk = l % TK; mm = l / TK; }
            ll gm = m0 + mm, gk = k0 + kk;
            float v = 0.f;
            if (gm < M && gk < K) v = transA ? A[gk * lda + gm] : A[gm * lda + gk];
            As[kk][mm] = v;
        }
#pragma unroll
        for (int l = tid; l < TK * TN; l += 256) {
            int nn, kk;
            if (transB) { kk = l % TK; nn = l / TK; } else { nn = l % TN; kk = l / TN; }
            ll gn = n0 + nn, gk = k0 + kk;
            float v = 0.f;
            if (gn < N && gk < K) v = transB ? B[gn * ldb + gk] : B[gk * ldb + gn];
            Bs[kk][nn] = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TK; kk++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) a[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; j++) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        ll gm = m0 + ty + 16 * i;
        if (gm >= M) continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            ll gn = n0 + tx + 16 * j;
            if (gn >= N) continue;
            float v = alpha * acc[i][j];
            if (beta != 0.f) v = fmaf(beta, C[gm * N + gn], v);
            C[gm * N + gn] = v;
        }
    }
}

// ---------------------------------------------------------------- element-wise

// scale_inplace: x *= beta, with beta == 0 an overwrite with zeros (NaNs too).
extern "C" __global__ void scale_inplace(float* x, ll n, double beta_d) {
    float beta = (float)beta_d;
    GRID_STRIDE(i, n) x[i] = beta == 0.f ? 0.f : x[i] * beta;
}

// scale: x *= alpha (a plain multiply: NaN·0 stays NaN, as on the CPU).
extern "C" __global__ void scale(float* x, ll n, double alpha_d) {
    float alpha = (float)alpha_d;
    GRID_STRIDE(i, n) x[i] *= alpha;
}

extern "C" __global__ void add(float* dst, const float* a, const float* b, ll n) {
    GRID_STRIDE(i, n) dst[i] = a[i] + b[i];
}

extern "C" __global__ void axpy(float* y, const float* x, ll n, double alpha_d) {
    float alpha = (float)alpha_d;
    GRID_STRIDE(i, n) y[i] += alpha * x[i];
}

extern "C" __global__ void relu(float* dst, const float* src, ll n) {
    GRID_STRIDE(i, n) dst[i] = fmaxf(src[i], 0.f);
}

extern "C" __global__ void relu_backward(float* dx, const float* dy, const float* y, ll n) {
    GRID_STRIDE(i, n) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

// dropout_uniform is kernels.DropoutUniform: SplitMix64's finaliser on
// seed + (e+1)·golden, top 24 bits scaled to [0,1). Bit-exact with the Go
// function (integer arithmetic mod 2^64; the float conversion and the scale
// by 2^-24 are exact).
__device__ __forceinline__ float dropout_uniform(ull seed, ull e) {
    ull z = seed + (e + 1ULL) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

extern "C" __global__ void dropout(float* dst, const float* src, float* mask, ll n, double p_d, double keep_d, ull seed) {
    float p = (float)p_d, keep = (float)keep_d;
    GRID_STRIDE(i, n) {
        float m = dropout_uniform(seed, (ull)i) >= p ? keep : 0.f;
        mask[i] = m;
        dst[i] = src[i] * m;
    }
}

extern "C" __global__ void mul(float* dst, const float* a, const float* b, ll n) {
    GRID_STRIDE(i, n) dst[i] = a[i] * b[i];
}

extern "C" __global__ void add_bias(float* x, const float* bias, ll rows, ll cols) {
    GRID_STRIDE(t, rows * cols) x[t] += bias[t % cols];
}

extern "C" __global__ void adam(float* param, const float* grad, float* m, float* v, ll n,
                                double lr_d, double b1_d, double b2_d, double eps_d, double wd_d, double c1_d, double c2_d) {
    float lr = (float)lr_d, b1 = (float)b1_d, b2 = (float)b2_d, eps = (float)eps_d, wd = (float)wd_d;
    float c1 = (float)c1_d, c2 = (float)c2_d;
    GRID_STRIDE(i, n) {
        float g = grad[i] + wd * param[i];
        float mi = b1 * m[i] + (1.f - b1) * g;
        float vi = b2 * v[i] + (1.f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        param[i] -= lr * (mi / c1) / (sqrtf(vi / c2) + eps);
    }
}

// ---------------------------------------------------------------- column reductions

// colreduce_partial: partial[b·cols + c] = Σ_{r in chunk b} w(r, c)·x[r·cols + c]
// for chunks of `chunk` rows, r ascending; w(r, c) = 1 when weight is NULL,
// else weight[r·H + c/F]. colreduce_final sums the partials of each column in
// chunk order. Both are fixed-order: the result depends only on chunk.
extern "C" __global__ void colreduce_partial(const float* x, const float* weight, float* partial, ll rows, ll cols,
                                             ll H, ll F, ll chunk, ll nchunks) {
    GRID_STRIDE(t, nchunks * cols) {
        ll b = t / cols, c = t % cols;
        ll r0 = b * chunk, r1 = min(rows, r0 + chunk);
        float s = 0.f;
        if (weight) {
            ll h = c / F;
            for (ll r = r0; r < r1; r++) s += weight[r * H + h] * x[r * cols + c];
        } else {
            for (ll r = r0; r < r1; r++) s += x[r * cols + c];
        }
        partial[t] = s;
    }
}

extern "C" __global__ void colreduce_final(const float* partial, float* out, ll cols, ll nchunks) {
    GRID_STRIDE(c, cols) {
        float s = 0.f;
        for (ll b = 0; b < nchunks; b++) s += partial[b * cols + c];
        out[c] = s;
    }
}

// ---------------------------------------------------------------- gather / scatter

// gather_rows: dst[r] = src[idx[r]] for n rows of f columns. src may be a
// device pointer to registered host memory (zero-copy over UVA). Indices
// outside [0, srcRows) set the error flag and leave the row zero.
extern "C" __global__ void gather_rows(float* dst, const float* src, const int* idx, ll n, ll f, ll srcRows, ull* err) {
    GRID_STRIDE(t, n * f) {
        ll r = t / f, c = t % f;
        ll j = idx[r];
        if (j < 0 || j >= srcRows) {
            if (c == 0) set_err(err, ERR_GATHER, r);
            dst[t] = 0.f;
            continue;
        }
        dst[t] = src[j * f + c];
    }
}

// scatter_mark counts, per destination row, how many idx entries hit it
// (integer atomics: the counts are order-independent) and raises *dup when a
// row is hit twice; bad indices set the error flag.
extern "C" __global__ void scatter_mark(const int* idx, int* count, int* dup, ll n, ll dstRows, ull* err) {
    GRID_STRIDE(r, n) {
        ll j = idx[r];
        if (j < 0 || j >= dstRows) {
            set_err(err, ERR_SCATTER, r);
            continue;
        }
        if (atomicAdd(count + j, 1) > 0) atomicExch(dup, 1);
    }
}

// scatter_add_unique runs when no row repeats: one add per element, so the
// row-parallel order is the sequential order.
extern "C" __global__ void scatter_add_unique(float* dst, const float* src, const int* idx, const int* dup, ll n, ll f, ll dstRows) {
    if (*dup) return;
    GRID_STRIDE(t, n * f) {
        ll r = t / f, c = t % f;
        ll j = idx[r];
        if (j < 0 || j >= dstRows) continue;
        dst[j * f + c] += src[t];
    }
}

// scatter_add_serial runs when rows repeat: one thread per column walks r in
// increasing order, as the interface requires.
extern "C" __global__ void scatter_add_serial(float* dst, const float* src, const int* idx, const int* dup, ll n, ll f, ll dstRows) {
    if (!*dup) return;
    GRID_STRIDE(c, f) {
        for (ll r = 0; r < n; r++) {
            ll j = idx[r];
            if (j < 0 || j >= dstRows) continue;
            dst[j * f + c] += src[r * f + c];
        }
    }
}

// ---------------------------------------------------------------- aggregation

// op: 0 mean, 1 sum, 2 gcn (kernels.AggOp).
extern "C" __global__ void aggregate(const int* indptr, const int* indices, const float* nbrNorm, const float* selfNorm,
                                     const float* srcNorm, float* dst, const float* src, ll numDst, ll f, ll op) {
    GRID_STRIDE(t, numDst * f) {
        ll i = t / f, c = t % f;
        int s = indptr[i], e = indptr[i + 1];
        float acc = 0.f;
        if (op == 2) {
            for (int k = s; k < e; k++) {
                ll j = indices[k];
                acc += srcNorm[j] * src[j * f + c];
            }
            acc = acc * nbrNorm[i] + selfNorm[i] * srcNorm[i] * src[i * f + c];
        } else {
            for (int k = s; k < e; k++) acc += src[(ll)indices[k] * f + c];
            if (op == 0 && e > s) acc *= 1.f / (float)(e - s);
        }
        dst[t] = acc;
    }
}

// aggregate_backward: dSrc = Aᵀ·dDst over the transposed CSR (tIndptr over
// sources, tDst the destination of each in-edge, ascending edge id).
extern "C" __global__ void aggregate_backward(const int* indptr, const int* tIndptr, const int* tDst, const float* nbrNorm,
                                              const float* selfNorm, const float* srcNorm, float* dSrc, const float* dDst,
                                              ll numDst, ll numSrc, ll f, ll op) {
    GRID_STRIDE(t, numSrc * f) {
        ll j = t / f, c = t % f;
        int s = tIndptr[j], e = tIndptr[j + 1];
        float acc = 0.f;
        if (op == 2) {
            if (j < numDst) acc += selfNorm[j] * dDst[j * f + c];
            for (int p = s; p < e; p++) {
                ll i = tDst[p];
                acc += nbrNorm[i] * dDst[i * f + c];
            }
            acc *= srcNorm[j];
        } else if (op == 1) {
            for (int p = s; p < e; p++) acc += dDst[(ll)tDst[p] * f + c];
        } else {
            for (int p = s; p < e; p++) {
                ll i = tDst[p];
                acc += (1.f / (float)(indptr[i + 1] - indptr[i])) * dDst[i * f + c];
            }
        }
        dSrc[t] = acc;
    }
}

// ---------------------------------------------------------------- softmax, loss, argmax

// log_softmax: one thread per row; the log-sum-exp is accumulated in double.
extern "C" __global__ void log_softmax(float* dst, const float* src, ll rows, ll cols) {
    GRID_STRIDE(r, rows) {
        const float* x = src + r * cols;
        float m = -INFINITY;
        for (ll c = 0; c < cols; c++) m = fmaxf(m, x[c]);
        double s = 0;
        for (ll c = 0; c < cols; c++) s += exp((double)(x[c] - m));
        double lse = (double)m + log(s);
        for (ll c = 0; c < cols; c++) dst[r * cols + c] = (float)((double)x[c] - lse);
    }
}

#define RED_THREADS 256

// count_labelled: *n = number of labels >= 0 (single block); labels outside
// [-1, cols) set the error flag.
extern "C" __global__ void __launch_bounds__(RED_THREADS) count_labelled(const int* labels, ll rows, ll cols, ll* n, ull* err) {
    __shared__ ll sh[RED_THREADS];
    ll cnt = 0;
    for (ll r = threadIdx.x; r < rows; r += RED_THREADS) {
        int l = labels[r];
        if (l < -1 || l >= cols) set_err(err, ERR_LABEL, r);
        else if (l >= 0) cnt++;
    }
    sh[threadIdx.x] = cnt;
    __syncthreads();
    for (int s = RED_THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) *n = sh[0];
}

// cross_entropy_rows: rowLoss[r] = lse - x[label] for labelled rows (0
// otherwise) and, when dLogits is not NULL, the gradient (softmax -
// onehot)/n, 0 on ignored rows.
extern "C" __global__ void cross_entropy_rows(float* dLogits, const float* logits, const int* labels, const ll* n,
                                              double* rowLoss, ll rows, ll cols) {
    ll cnt = *n;
    float inv = cnt > 0 ? 1.f / (float)cnt : 0.f;
    GRID_STRIDE(r, rows) {
        const float* x = logits + r * cols;
        int l = labels[r];
        float* d = dLogits ? dLogits + r * cols : 0;
        if (l < 0 || l >= cols) {
            rowLoss[r] = 0;
            if (d) for (ll c = 0; c < cols; c++) d[c] = 0.f;
            continue;
        }
        float m = -INFINITY;
        for (ll c = 0; c < cols; c++) m = fmaxf(m, x[c]);
        double s = 0;
        for (ll c = 0; c < cols; c++) s += exp((double)(x[c] - m));
        double lse = (double)m + log(s);
        rowLoss[r] = lse - (double)x[l];
        if (d) {
            for (ll c = 0; c < cols; c++) d[c] = (float)exp((double)x[c] - lse) * inv;
            d[l] -= inv;
        }
    }
}

// sum_f64: *out = Σ x in a fixed order: thread t sums t, t+256, ... in
// ascending order, then a fixed-shape tree combines the 256 partials.
extern "C" __global__ void __launch_bounds__(RED_THREADS) sum_f64(const double* x, ll n, double* out) {
    __shared__ double sh[RED_THREADS];
    double s = 0;
    for (ll i = threadIdx.x; i < n; i += RED_THREADS) s += x[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int k = RED_THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = sh[0];
}

__device__ __forceinline__ int row_argmax(const float* x, ll cols) {
    int best = 0;
    for (ll c = 1; c < cols; c++)
        if (x[c] > x[best]) best = (int)c;
    return best;
}

extern "C" __global__ void argmax_rows(int* dst, const float* src, ll rows, ll cols) {
    GRID_STRIDE(r, rows) dst[r] = row_argmax(src + r * cols, cols);
}

// accuracy: out[0] = correct, out[1] = labelled rows (single block; integer
// sums, so the result does not depend on the order).
extern "C" __global__ void __launch_bounds__(RED_THREADS) accuracy(const float* logits, const int* labels, ll rows, ll cols, ll* out, ull* err) {
    __shared__ ll shc[RED_THREADS], sht[RED_THREADS];
    ll correct = 0, total = 0;
    for (ll r = threadIdx.x; r < rows; r += RED_THREADS) {
        int l = labels[r];
        if (l < -1 || l >= cols) {
            set_err(err, ERR_LABEL, r);
            continue;
        }
        if (l < 0) continue;
        total++;
        if (row_argmax(logits + r * cols, cols) == l) correct++;
    }
    shc[threadIdx.x] = correct;
    sht[threadIdx.x] = total;
    __syncthreads();
    for (int k = RED_THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            shc[threadIdx.x] += shc[threadIdx.x + k];
            sht[threadIdx.x] += sht[threadIdx.x + k];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = shc[0];
        out[1] = sht[0];
    }
}

// ---------------------------------------------------------------- GAT

// head_dots: out[r·H + h] = Σ_f a[h·F+f]·x[r·HF + h·F+f], f ascending.
extern "C" __global__ void head_dots(float* out, const float* x, const float* a, ll rows, ll H, ll F) {
    GRID_STRIDE(t, rows * H) {
        ll r = t / H, h = t % H;
        const float* row = x + r * H * F + h * F;
        const float* av = a + h * F;
        float s = 0.f;
        for (ll f = 0; f < F; f++) s += av[f] * row[f];
        out[t] = s;
    }
}

// gat_scores: edge k from source j to destination i = edgeDst[k].
extern "C" __global__ void gat_scores(float* scores, const int* edgeDst, const int* indices, const float* el, const float* er,
                                      ll E, ll H, double slope_d) {
    float slope = (float)slope_d;
    GRID_STRIDE(t, E * H) {
        ll k = t / H, h = t % H;
        float x = el[(ll)edgeDst[k] * H + h] + er[(ll)indices[k] * H + h];
        if (x < 0.f) x *= slope;
        scores[t] = x;
    }
}

// leaky_backward: g = dS where S > 0, else dS·slope.
extern "C" __global__ void leaky_backward(float* g, const float* dS, const float* S, ll n, double slope_d) {
    float slope = (float)slope_d;
    GRID_STRIDE(i, n) g[i] = S[i] > 0.f ? dS[i] : dS[i] * slope;
}

// csr_edge_sum: out[i·H + h] = Σ_{k∈N(i)} g[k·H + h], k ascending.
extern "C" __global__ void csr_edge_sum(float* out, const float* g, const int* indptr, ll n, ll H) {
    GRID_STRIDE(t, n * H) {
        ll i = t / H, h = t % H;
        float s = 0.f;
        for (int k = indptr[i]; k < indptr[i + 1]; k++) s += g[(ll)k * H + h];
        out[t] = s;
    }
}

// tcsr_edge_sum: out[j·H + h] = Σ over source j's in-edges (ascending edge
// id) of g[k·H + h].
extern "C" __global__ void tcsr_edge_sum(float* out, const float* g, const int* tIndptr, const int* tEdge, ll n, ll H) {
    GRID_STRIDE(t, n * H) {
        ll j = t / H, h = t % H;
        float s = 0.f;
        for (int p = tIndptr[j]; p < tIndptr[j + 1]; p++) s += g[(ll)tEdge[p] * H + h];
        out[t] = s;
    }
}

// gat_dwh: dWh[j, h·F+f] = dEl[j,h]·attnL[h·F+f] (j < numDst only) +
// dEr[j,h]·attnR[h·F+f].
extern "C" __global__ void gat_dwh(float* dWh, const float* dEl, const float* dEr, const float* attnL, const float* attnR,
                                   ll numDst, ll numSrc, ll H, ll F) {
    ll hf = H * F;
    GRID_STRIDE(t, numSrc * hf) {
        ll j = t / hf, c = t % hf, h = c / F;
        float der = dEr[j * H + h];
        if (j < numDst) dWh[t] = dEl[j * H + h] * attnL[c] + der * attnR[c];
        else dWh[t] = der * attnR[c];
    }
}

// edge_softmax: per destination and head, max-subtracted softmax over the
// destination's in-edges.
extern "C" __global__ void edge_softmax(float* alpha, const float* scores, const int* indptr, ll numDst, ll H) {
    GRID_STRIDE(t, numDst * H) {
        ll i = t / H, h = t % H;
        int s = indptr[i], e = indptr[i + 1];
        float m = -INFINITY;
        for (int k = s; k < e; k++) m = fmaxf(m, scores[(ll)k * H + h]);
        float sum = 0.f;
        for (int k = s; k < e; k++) {
            float x = (float)exp((double)(scores[(ll)k * H + h] - m));
            alpha[(ll)k * H + h] = x;
            sum += x;
        }
        float inv = 1.f / sum;
        for (int k = s; k < e; k++) alpha[(ll)k * H + h] *= inv;
    }
}

extern "C" __global__ void edge_softmax_backward(float* dScores, const float* dAlpha, const float* alpha, const int* indptr,
                                                 ll numDst, ll H) {
    GRID_STRIDE(t, numDst * H) {
        ll i = t / H, h = t % H;
        int s = indptr[i], e = indptr[i + 1];
        float dot = 0.f;
        for (int k = s; k < e; k++) dot += alpha[(ll)k * H + h] * dAlpha[(ll)k * H + h];
        for (int k = s; k < e; k++) dScores[(ll)k * H + h] = alpha[(ll)k * H + h] * (dAlpha[(ll)k * H + h] - dot);
    }
}

// edge_weighted_sum: out[i, c] = Σ_{k∈N(i)} alpha[k, c/F]·wh[j_k, c].
extern "C" __global__ void edge_weighted_sum(float* out, const float* alpha, const float* wh, const int* indptr,
                                             const int* indices, ll numDst, ll H, ll F) {
    ll hf = H * F;
    GRID_STRIDE(t, numDst * hf) {
        ll i = t / hf, c = t % hf, h = c / F;
        float s = 0.f;
        for (int k = indptr[i]; k < indptr[i + 1]; k++) s += alpha[(ll)k * H + h] * wh[(ll)indices[k] * hf + c];
        out[t] = s;
    }
}

// edge_weighted_sum_dalpha: dAlpha[k, h] = Σ_f dOut[i_k, h·F+f]·wh[j_k, h·F+f].
extern "C" __global__ void edge_weighted_sum_dalpha(float* dAlpha, const float* dOut, const float* wh, const int* edgeDst,
                                                    const int* indices, ll E, ll H, ll F) {
    ll hf = H * F;
    GRID_STRIDE(t, E * H) {
        ll k = t / H, h = t % H;
        const float* d = dOut + (ll)edgeDst[k] * hf + h * F;
        const float* w = wh + (ll)indices[k] * hf + h * F;
        float s = 0.f;
        for (ll f = 0; f < F; f++) s += d[f] * w[f];
        dAlpha[t] = s;
    }
}

// edge_weighted_sum_dwh: dWh[j, c] = Σ over source j's in-edges k (ascending)
// of alpha[k, c/F]·dOut[i_k, c].
extern "C" __global__ void edge_weighted_sum_dwh(float* dWh, const float* dOut, const float* alpha, const int* tIndptr,
                                                 const int* tEdge, const int* tDst, ll numSrc, ll H, ll F) {
    ll hf = H * F;
    GRID_STRIDE(t, numSrc * hf) {
        ll j = t / hf, c = t % hf, h = c / F;
        float s = 0.f;
        for (int p = tIndptr[j]; p < tIndptr[j + 1]; p++) s += alpha[(ll)tEdge[p] * H + h] * dOut[(ll)tDst[p] * hf + c];
        dWh[t] = s;
    }
}
