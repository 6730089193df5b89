// fit_gelu_poly.cpp — derives the coefficients of gelu_poly (spec 3.1) and prints them.
//
//   g++ -std=c++17 -O2 verify/tools/fit_gelu_poly.cpp -o fit_gelu_poly && ./fit_gelu_poly [degree=8] [clamp=4]
//
// The form (docs/gelu_poly.md has the derivation):
//   v = min(|x|, C),   G(v) = v R(v),   R(v) = sum_{j<m} r_j v^j,   f(x) = 0.5 x + |x| G(v)
// For |x| < C this is 0.5 x (1 + E(|x|)) with E = 2G, a degree-m polynomial with E(0) = 0 standing
// in for erf(|x| / sqrt 2) on [0, C]. Two equality constraints make the clamp seamless:
//   E(C) = 1    beyond the clamp f is exactly relu, so f is continuous;
//   E'(C) = 0   f' is continuous too, so one branch-free formula serves every x:
//               f'(x) = 0.5 + u D(v),  u = copysign(v, x),  D(v) = sum_j (j+2) r_j v^j.
// The free coefficients minimise the worst of |f - gelu| / 5e-4 and |f' - gelu'| / (5e-4 max(1,|x|))
// over a grid of [0, C] — exactly the spec's two bounds, as one weighted minimax problem — solved
// with Stiefel's exchange algorithm (the simplex method on the dual of the discrete Chebyshev
// problem), in long double. The rounded fp32 constants are then nudged by a few ulps so that the
// fp32 Horner values at v = C are exactly 1/(2C) (C a power of two), which makes the fp32 forward
// exactly relu and the fp32 derivative exactly 0 or 1 beyond the clamp, for every finite x.
// Last, the achieved errors are measured on x in [-50, 50] with step 1e-4 twice: the definition of the
// activation (the polynomial with the printed fp32 constants, in long double, relu from the clamp on),
// and the fp32 form evaluated in the kernels' operation order.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using Real = long double;
using Vec = std::vector<Real>;
using Mat = std::vector<Vec>;

const Real kSqrt2 = std::sqrt((Real)2);
const Real kInvSqrt2Pi = 1 / std::sqrt(2 * (Real)3.14159265358979323846264338327950288L);
const Real kTolerance = 5e-4L;  // spec 3.1, for f and (relative to max(1,|x|)) for f'

Real gelu(Real x) { return 0.5L * x * (1 + std::erf(x / kSqrt2)); }
Real gelu_d(Real x) { return 0.5L * (1 + std::erf(x / kSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5L * x * x); }

// Gaussian elimination with partial pivoting; the systems here are at most 10 x 10.
Vec solve(Mat a, Vec b) {
  const int n = (int)b.size();
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (int r = c + 1; r < n; ++r) {
      const Real m = a[r][c] / a[c][c];
      for (int k = c; k < n; ++k) a[r][k] -= m * a[c][k];
      b[r] -= m * b[c];
    }
  }
  Vec x(n);
  for (int r = n - 1; r >= 0; --r) {
    Real s = b[r];
    for (int k = r + 1; k < n; ++k) s -= a[r][k] * x[k];
    x[r] = s / a[r][r];
  }
  return x;
}

// min over beta of max_i |A_i . beta - b_i|. Keeps a reference of k+1 rows with signs s_i; on it the
// best beta levels the residuals to s_i h. The worst row outside the reference enters, and the
// ratio test on the dual weights (which stay >= 0) picks the row that leaves. |h| rises every step
// and stops at the minimax value.
Vec minimax(const Mat& A, const Vec& b, Real* level) {
  const int rows = (int)A.size(), k = (int)A[0].size();
  std::vector<int> ref(k + 1);
  Vec sign(k + 1);
  for (int i = 0; i <= k; ++i) ref[i] = (int)((rows - 1) * (1 - std::cos(3.14159265358979L * i / k)) / 2);
  for (int i = 1; i <= k; ++i)
    if (ref[i] <= ref[i - 1]) ref[i] = ref[i - 1] + 1;
  {  // starting signs: those of the null vector of the reference rows (keeps the dual weights >= 0)
    Mat m(k + 1, Vec(k + 1, 0));
    Vec rhs(k + 1, 0);
    for (int r = 0; r < k; ++r)
      for (int i = 0; i <= k; ++i) m[r][i] = A[ref[i]][r];
    m[k][0] = 1;
    rhs[k] = 1;
    const Vec null = solve(m, rhs);
    for (int i = 0; i <= k; ++i) sign[i] = null[i] >= 0 ? 1 : -1;
  }
  Vec beta(k);
  Real h = 0;
  for (int iter = 0; iter < 10000; ++iter) {
    Mat m(k + 1, Vec(k + 1));
    Vec rhs(k + 1);
    for (int i = 0; i <= k; ++i) {
      for (int c = 0; c < k; ++c) m[i][c] = A[ref[i]][c];
      m[i][k] = -sign[i];
      rhs[i] = b[ref[i]];
    }
    const Vec z = solve(m, rhs);
    for (int c = 0; c < k; ++c) beta[c] = z[c];
    h = std::fabs(z[k]);
    int enter = -1;
    Real worst = 0, enter_sign = 1;
    for (int i = 0; i < rows; ++i) {
      Real r = -b[i];
      for (int c = 0; c < k; ++c) r += A[i][c] * beta[c];
      if (std::fabs(r) > worst) worst = std::fabs(r), enter = i, enter_sign = r >= 0 ? 1 : -1;
    }
    if (worst <= h * (1 + 1e-12L)) break;
    Mat basis(k + 1, Vec(k + 1));
    Vec unit(k + 1, 0), column(k + 1);
    for (int i = 0; i <= k; ++i) {
      for (int c = 0; c < k; ++c) basis[c][i] = sign[i] * A[ref[i]][c];
      basis[k][i] = 1;
    }
    unit[k] = 1;
    for (int c = 0; c < k; ++c) column[c] = enter_sign * A[enter][c];
    column[k] = 1;
    const Vec weight = solve(basis, unit), dir = solve(basis, column);
    int leave = -1;
    Real best = 1e300L;
    for (int i = 0; i <= k; ++i)
      if (dir[i] > 1e-18L && weight[i] / dir[i] < best) best = weight[i] / dir[i], leave = i;
    if (leave < 0) break;
    ref[leave] = enter;
    sign[leave] = enter_sign;
  }
  *level = h;
  return beta;
}

// Fits alpha_1..alpha_m in E(v) = sum_k alpha_k t^k, t = v / C (the scaled basis keeps the systems
// well conditioned). alpha_{m-1} and alpha_m are eliminated through the two constraints
// sum alpha_k = 1 (E(C) = 1) and sum k alpha_k = 0 (E'(C) = 0).
Vec fit(int m, Real clamp, Real* level) {
  const int free = m - 2;
  auto alpha_of = [&](const Vec& beta) {
    Vec alpha(m + 1, 0);
    Real sum = 1, moment = 0;
    for (int k = 1; k <= free; ++k) alpha[k] = beta[k - 1], sum -= beta[k - 1], moment -= k * beta[k - 1];
    const int p = m - 1, q = m;  // alpha_p + alpha_q = sum, p alpha_p + q alpha_q = moment
    alpha[p] = (q * sum - moment) / (q - p);
    alpha[q] = (moment - p * sum) / (q - p);
    return alpha;
  };
  Mat A;
  Vec b;
  const int points = 4000;
  for (int i = 1; i <= points; ++i) {
    const Real u = clamp * i / points, t = u / clamp;
    const Real tol_f = kTolerance, tol_d = kTolerance * (u > 1 ? u : 1);
    // f - 0.5x = 0.5 |x| E(|x|)  and  f' - 0.5 = 0.5 sgn(x) (E + v E'), both linear in alpha.
    Vec gf(m + 1, 0), gd(m + 1, 0);
    for (int k = 1; k <= m; ++k) {
      const Real tk = std::pow(t, (Real)k);
      gf[k] = 0.5L * u * tk / tol_f;
      gd[k] = 0.5L * (k + 1) * tk / tol_d;
    }
    const Real target_f = (gelu(u) - 0.5L * u) / tol_f, target_d = (gelu_d(u) - 0.5L) / tol_d;
    for (int which = 0; which < 2; ++which) {
      const Vec& g = which ? gd : gf;
      const Vec base = alpha_of(Vec(free, 0));
      Real offset = 0;
      for (int k = 1; k <= m; ++k) offset += g[k] * base[k];
      Vec row(free);
      for (int c = 0; c < free; ++c) {
        Vec e(free, 0);
        e[c] = 1;
        const Vec ac = alpha_of(e);
        Real v = 0;
        for (int k = 1; k <= m; ++k) v += g[k] * ac[k];
        row[c] = v - offset;
      }
      A.push_back(row);
      b.push_back((which ? target_d : target_f) - offset);
    }
  }
  return alpha_of(minimax(A, b, level));
}

// The fp32 form exactly as kernels/common/activations.cuh evaluates it (fmaf, same order).
float horner(const std::vector<float>& c, float v) {
  float p = c.back();
  for (int j = (int)c.size() - 2; j >= 0; --j) p = std::fmaf(p, v, c[j]);
  return p;
}
float forward_f32(const std::vector<float>& r, float clamp, float x) {
  const float v = std::fmin(std::fabs(x), clamp);
  return std::fmaf(std::fabs(x), v * horner(r, v), 0.5f * x);
}
float derivative_f32(const std::vector<float>& d, float clamp, float x) {
  const float v = std::fmin(std::fabs(x), clamp);
  return std::fmaf(std::copysign(v, x), horner(d, v), 0.5f);
}

// Moves the constant term by whole ulps until the fp32 Horner value at v is exactly `want`.
bool pin_constant(std::vector<float>& c, float v, float want) {
  for (int step = 0; step < 64; ++step) {
    const float got = horner(c, v);
    if (got == want) return true;
    c[0] = std::nextafter(c[0], got > want ? -1e30f : 1e30f);
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int m = argc > 1 ? std::atoi(argv[1]) : 8;
  const Real clamp = argc > 2 ? std::strtold(argv[2], nullptr) : 4;
  if (m < 4 || m > 12 || !(clamp > 1)) {
    std::fprintf(stderr, "usage: fit_gelu_poly [degree 4..12] [clamp > 1]\n");
    return 2;
  }
  Real level = 0;
  const Vec alpha = fit(m, clamp, &level);

  // E(v) = sum alpha_k (v/C)^k = 2 v R(v)  ->  r_j = alpha_{j+1} / (2 C^(j+1));  d_j = (j+2) r_j.
  std::vector<float> r(m), d(m);
  Vec r_exact(m);
  for (int j = 0; j < m; ++j) {
    r_exact[j] = alpha[j + 1] / (2 * std::pow(clamp, (Real)(j + 1)));
    r[j] = (float)r_exact[j];
    d[j] = (float)((j + 2) * r_exact[j]);
  }
  const float cf = (float)clamp;
  const bool power_of_two = std::ldexp(1.0f, std::ilogb(cf)) == cf;
  const bool pinned = power_of_two && pin_constant(r, cf, 0.5f / cf) && pin_constant(d, cf, 0.5f / cf);

  // Errors: the polynomial with the fp32 constants in exact arithmetic, and the fp32 form.
  Real ef = 0, ed = 0, ef32 = 0, ed32 = 0, at_ef = 0, at_ed = 0;
  for (long i = -500000; i <= 500000; ++i) {
    // The definition (as act_f_exact / act_df_exact): the polynomial with the fp32 constants r_j
    // inside the clamp, its exact derivative (coefficients (j+2) r_j), relu and relu' beyond.
    const Real x = i * 1e-4L, v = std::fabs(x);
    Real rv = 0, hv = 0;
    for (int j = m - 1; j >= 0; --j) rv = rv * v + r[j], hv = hv * v + (j + 2) * (Real)r[j];
    const bool inside = v < (Real)cf;
    const Real f = inside ? 0.5L * x + v * v * rv : (x > 0 ? x : 0);
    const Real df = inside ? 0.5L + x * hv : (x > 0 ? 1 : 0);
    const Real scale = std::fmax((Real)1, std::fabs(x));
    const Real e1 = std::fabs(f - gelu(x)), e2 = std::fabs(df - gelu_d(x)) / scale;
    if (e1 > ef) ef = e1, at_ef = x;
    if (e2 > ed) ed = e2, at_ed = x;
    const float xf = (float)x;
    const Real sf = std::fmax((Real)1, std::fabs((Real)xf));
    ef32 = std::fmax(ef32, std::fabs(forward_f32(r, cf, xf) - gelu(xf)));
    ed32 = std::fmax(ed32, std::fabs(derivative_f32(d, cf, xf) - gelu_d(xf)) / sf);
  }

  std::printf("gelu_poly: degree %d on [0, C], C = %.6Lg, constraints E(C) = 1, E'(C) = 0\n", m, clamp);
  std::printf("minimax level of the fit (worst error / bound): %.4Lf\n", level);
  std::printf("fp32 values at the clamp pinned to 1/(2C): %s\n\n", pinned ? "yes" : "NO");
  std::printf("// f(x) = 0.5 x + |x| v R(v), v = min(|x|, %.9g); R(v) = sum_j kR[j] v^j\n", cf);
  for (int j = 0; j < m; ++j) std::printf("%.9ef,  // r%d  (exact %.12Le)\n", r[j], j, r_exact[j]);
  std::printf("// f'(x) = 0.5 + copysign(v, x) D(v); D(v) = sum_j kD[j] v^j, kD[j] = (j+2) kR[j]\n");
  for (int j = 0; j < m; ++j) std::printf("%.9ef,  // d%d  (exact %.12Le)\n", d[j], j, (j + 2) * r_exact[j]);

  std::printf("\nmax errors for x in [-50, 50], step 1e-4:\n");
  std::printf("  polynomial (exact arithmetic): |f - gelu| = %.3Le at x = %.4Lf; |f' - gelu'| / max(1,|x|) = %.3Le at x = %.4Lf\n",
              ef, at_ef, ed, at_ed);
  std::printf("  fp32 form:                     |f - gelu| = %.3Le;                |f' - gelu'| / max(1,|x|) = %.3Le\n", ef32,
              ed32);
  std::printf("  beyond the clamp (f = relu):   |f - gelu| <= %.3Le, |f' - gelu'| / max(1,|x|) <= %.3Le (both at |x| = C)\n",
              clamp * 0.5L * std::erfc(clamp / kSqrt2), std::fabs(gelu_d(-clamp)) / clamp);

  const Real c2 = kInvSqrt2Pi, c4 = -c2 / 6, c6 = c2 / 40;
  std::printf("\ngelu_taylor6 for contrast (0.5x + c2 x^2 + c4 x^4 + c6 x^6):\n");
  for (int xi = 1; xi <= 3; ++xi) {
    const Real x = xi;
    const Real t = 0.5L * x + c2 * x * x + c4 * std::pow(x, 4) + c6 * std::pow(x, 6);
    const Real td = 0.5L + 2 * c2 * x + 4 * c4 * std::pow(x, 3) + 6 * c6 * std::pow(x, 5);
    std::printf("  x = %d: |f - gelu| = %.4Le, |f' - gelu'| = %.4Le\n", xi, std::fabs(t - gelu(x)), std::fabs(td - gelu_d(x)));
  }
  const bool ok = pinned && ef <= kTolerance && ed <= kTolerance && ef32 <= kTolerance && ed32 <= kTolerance;
  std::printf("\nspec 3.1 bounds %s\n", ok ? "met" : "NOT met");
  return ok ? 0 : 1;
}
