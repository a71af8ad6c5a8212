// Pointer-chasing LOAD microbenchmark for the data-movement energy model
// (method.md section 7). Each thread walks a ring of 64-bit pointers with a
// stride of one 32-byte sector: a warm-up loop brings the array into the
// target level, then an unrolled measurement loop loads from it. Loads use
// inline PTX so the cache operator is explicit:
//   l1:     ld.global.ca  (cache in L1 and L2)
//   l2:     ld.global.cg  (cache in L2 only, bypass L1)
//   dram:   ld.global.cg  on an array larger than L2
//   shared: ld.shared     on a copy of the ring in dynamic shared memory
// A LOAD+DIV variant (--div) adds a dependent 64-bit integer division per
// load, for the DIV cross-check.
//
// Modes (one process, CUDA context made once):
//   sweep:  read points from stdin, one per line
//             level array_bytes tpb blocks warm_steps meas_steps launches div repeat spacing advance
//           and for each run the kernel `launches` times, measuring energy with
//           NVML's total-energy counter aligned to its updates; prints CSV.
//   pair:   [a priming launch,] a warm-up-only launch, then warm-up + measurement
//           (for ncu checks: the difference of the last two is the measurement loop's).
//   idle:   NVML idle power over the given seconds.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <map>
#include <chrono>
#include <thread>
#include <cuda_runtime.h>
#include <nvml.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(2); } } while (0)
#define NK(x) do { nvmlReturn_t r = (x); if (r != NVML_SUCCESS) { \
    fprintf(stderr, "NVML error %s at %s:%d\n", nvmlErrorString(r), __FILE__, __LINE__); exit(3); } } while (0)

static const int STRIDE = 4;   // elements of 8 bytes: one 32-byte sector per load

template <int OP>
__device__ __forceinline__ uint64_t load(uint64_t p) {
    uint64_t v;
    if (OP == 0) asm volatile("ld.global.ca.u64 %0, [%1];" : "=l"(v) : "l"(p));
    else if (OP == 1) asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(p));
    else asm volatile("ld.shared.u64 %0, [%1];" : "=l"(v) : "l"(p));
    return v;
}

// OP 0/1: global ring in `ring`; OP 2: ring copied to shared memory first.
template <int OP, bool DIV>
__global__ void chase(const uint64_t* ring, uint64_t n, long warm_steps, long meas_steps, uint64_t start,
                      uint64_t spacing, uint64_t* out) {
    extern __shared__ uint64_t sh[];
    uint64_t base = (uint64_t)ring;
    if (OP == 2) {
        // the shared ring holds offsets rebased to the shared window's address
        uint32_t sbase;
        asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(sbase) : "l"((uint64_t)sh));
        for (uint64_t i = threadIdx.x; i < n; i += blockDim.x)
            sh[i] = sbase + ((ring[i] - base) );
        __syncthreads();
        base = sbase;
    }
    uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t p = base + ((start + t * spacing) % n) * 8;   // spacing: elements between threads' starts
    uint64_t acc = 1;
    for (long i = 0; i < warm_steps; ++i) p = load<OP>(p);
    #pragma unroll 1
    for (long i = 0; i < meas_steps; i += 8) {
        #pragma unroll
        for (int u = 0; u < 8; ++u) {
            p = load<OP>(p);
            if (DIV) { acc = (p | 1) / (acc | 3) + p; p = p + (acc & 0) ; }
        }
    }
    if (p == 0 || acc == 0) out[t] = p + acc;   // never true; keeps the chain live
}

struct Ring {
    uint64_t* d = nullptr;
    uint64_t n = 0;
};

// Each element points STRIDE elements on, wrapping: built on the GPU, since a
// host-built 4 GiB ring took ~5 s to fill and copy.
__global__ void fill_ring(uint64_t* d, uint64_t n) {
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        d[i] = (uint64_t)d + ((i + STRIDE) % n) * 8;
}

static Ring make_ring(uint64_t bytes) {
    Ring r;
    r.n = bytes / 8;
    r.n -= r.n % STRIDE;
    CK(cudaMalloc(&r.d, r.n * 8));
    fill_ring<<<1024, 256>>>(r.d, r.n);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    return r;
}

// Rings by size, kept for the whole sweep: its points are shuffled across levels,
// and rebuilding the DRAM ring at every switch cost more than the runs themselves.
static const Ring& ring_of(std::map<uint64_t, Ring>& rings, uint64_t bytes) {
    auto it = rings.find(bytes);
    if (it == rings.end()) it = rings.emplace(bytes, make_ring(bytes)).first;
    return it->second;
}

static int op_of(const std::string& level) {
    if (level == "l1") return 0;
    if (level == "l2" || level == "dram") return 1;
    if (level == "shared") return 2;
    fprintf(stderr, "unknown level %s\n", level.c_str());
    exit(1);
}

static void launch(int op, bool div, const Ring& r, int tpb, int blocks, long warm, long meas, uint64_t start,
                   uint64_t spacing, uint64_t* out) {
    size_t shm = op == 2 ? r.n * 8 : 0;
    #define L(O, D) chase<O, D><<<blocks, tpb, shm>>>(r.d, r.n, warm, meas, start, spacing, out)
    if (op == 0) { if (div) L(0, true); else L(0, false); }
    else if (op == 1) { if (div) L(1, true); else L(1, false); }
    else { if (div) L(2, true); else L(2, false); }
    #undef L
    CK(cudaGetLastError());
}

static uint64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::system_clock::now().time_since_epoch()).count();
}

// Wait for the energy counter to change; returns (counter mJ, time ns) right after it did.
static std::pair<unsigned long long, uint64_t> next_update(nvmlDevice_t dev) {
    unsigned long long e0, e;
    NK(nvmlDeviceGetTotalEnergyConsumption(dev, &e0));
    do { NK(nvmlDeviceGetTotalEnergyConsumption(dev, &e)); } while (e == e0);
    return {e, now_ns()};
}

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "sweep";
    NK(nvmlInit());
    int cuda_dev = 0;
    CK(cudaSetDevice(cuda_dev));
    char bus[64];
    CK(cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_dev));
    nvmlDevice_t dev;
    NK(nvmlDeviceGetHandleByPciBusId(bus, &dev));
    char name[96];
    NK(nvmlDeviceGetName(dev, name, sizeof name));
    int max_shm = 0;
    CK(cudaDeviceGetAttribute(&max_shm, cudaDevAttrMaxSharedMemoryPerBlockOptin, cuda_dev));
    CK(cudaFuncSetAttribute(chase<2, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, max_shm));
    CK(cudaFuncSetAttribute(chase<2, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, max_shm));
    uint64_t* out;
    CK(cudaMalloc(&out, 1 << 24));

    if (mode == "idle") {
        double secs = argc > 2 ? atof(argv[2]) : 1.0;
        auto a = next_update(dev);
        std::this_thread::sleep_for(std::chrono::duration<double>(secs));
        auto b = next_update(dev);
        printf("idle_w,%.4f\n", (b.first - a.first) * 1e-3 / ((b.second - a.second) * 1e-9));
        return 0;
    }
    if (mode == "pair") {   // level array_bytes tpb blocks warm_steps meas_steps spacing: warm-only, then warm+meas (ncu checks)
        std::string level = argv[2];
        uint64_t bytes = strtoull(argv[3], 0, 10);
        int tpb = atoi(argv[4]), blocks = atoi(argv[5]);
        long ws = atol(argv[6]), ms = atol(argv[7]);
        uint64_t spacing = strtoull(argv[8], 0, 10);
        bool prime = argc > 9 && atoi(argv[9]);   // first an untimed pass over the measured data (L2)
        Ring r = make_ring(bytes);
        int op = op_of(level);
        if (prime) launch(op, false, r, tpb, blocks, 0, ms, 0, spacing, out);
        launch(op, false, r, tpb, blocks, ws, 0, 0, spacing, out);
        launch(op, false, r, tpb, blocks, ws, ms, 0, spacing, out);
        CK(cudaDeviceSynchronize());
        printf("ok,%s,%llu,%d,%d,%ld,%ld,%llu\n", level.c_str(), (unsigned long long)bytes, tpb, blocks, ws, ms,
               (unsigned long long)r.n);
        return 0;
    }
    // sweep
    printf("gpu,level,array_bytes,threads_per_block,blocks,warm_steps,meas_steps,launches,div,repeat,"
           "kernel_ns,window_ns,energy_mj,start_ns,sm_clock_mhz,mem_clock_mhz,temp_c\n");
    char line[512];
    std::map<uint64_t, Ring> rings;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    while (fgets(line, sizeof line, stdin)) {
        char lv[16];
        unsigned long long bytes;
        int tpb, blocks, div, rep;
        long wp, mp, launches;
        unsigned long long spacing, advance;   // advance: elements each launch moves on (DRAM: fresh data)
        if (sscanf(line, "%15s %llu %d %d %ld %ld %ld %d %d %llu %llu", lv, &bytes, &tpb, &blocks, &wp, &mp, &launches,
                   &div, &rep, &spacing, &advance) != 11)
            continue;
        const Ring& r = ring_of(rings, bytes);
        int op = op_of(lv);
        launch(op, div, r, tpb, blocks, wp, mp, 0, spacing, out);   // untimed: caches, clocks
        CK(cudaDeviceSynchronize());
        auto a = next_update(dev);
        CK(cudaEventRecord(e0));
        for (long i = 0; i < launches; ++i) launch(op, div, r, tpb, blocks, wp, mp, (1 + i) * advance, spacing, out);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        unsigned int sm = 0, mem = 0, temp = 0;
        nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, &sm);
        nvmlDeviceGetClockInfo(dev, NVML_CLOCK_MEM, &mem);
        nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &temp);
        auto b = next_update(dev);
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        printf("%s,%s,%llu,%d,%d,%ld,%ld,%ld,%d,%d,%.0f,%llu,%llu,%llu,%u,%u,%u\n", name, lv, bytes, tpb, blocks,
               wp, mp, launches, div, rep, ms * 1e6, (unsigned long long)(b.second - a.second),
               b.first - a.first, (unsigned long long)a.second, sm, mem, temp);
        fflush(stdout);
    }
    return 0;
}
