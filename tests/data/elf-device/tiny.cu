extern "C" __global__ void tiny_fill(float* out, float value) { out[threadIdx.x] = value; }
extern "C" void tiny_launch(float* out, float value) { tiny_fill<<<1, 32>>>(out, value); }
