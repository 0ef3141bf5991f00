/** Seconds and other figures as the metrics and logs show them: three decimals unless told. */
export const round = (n: number, digits = 3) => Number(n.toFixed(digits));
