__global__ void add_seven(int *p) { p[0] += 7; }
void launch_add_seven(int *p) { add_seven<<<1, 1>>>(p); }
