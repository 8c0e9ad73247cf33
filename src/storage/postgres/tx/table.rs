//! Tables: one record kind in a transaction (point reads, writes, keyset scans) and its row iterator.

use super::*;

/// The types a [`PgTable`] carries without holding: its kind's key and value, and the transaction's lifetime.
pub(super) type Types<'t, K, V> = PhantomData<fn() -> (&'t (), K, V)>;

/// One record kind in a transaction.
pub struct PgTable<'t, K, V> {
    pub(super) tx: Arc<Mutex<TxConn>>,
    pub(super) name: &'static str,
    /// For the `vectors` kind where pgvector is enabled: every write also goes to `engram_vectors`.
    pub(super) side: Option<Arc<VectorIndex>>,
    pub(super) types: Types<'t, K, V>,
}

impl<'t, K: KeyType, V: ValueType> PgTable<'t, K, V> {
    /// The value columns to select: `v0, v1` (`1` for a kind without value).
    fn value_cols() -> String {
        if V::PARTS == 0 { "1".to_string() } else { list("v", V::PARTS) }
    }

    /// Runs a statement that reads or writes this table by a scan or a key (held-back writes of the table
    /// sent first).
    fn query(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>> {
        self.tx.lock().conn_scanning(self.name)?.query(sql, params)
    }

    fn value(row: &Row, from: usize) -> Result<Vec<u8>> {
        V::encode(&columns(row, from, V::PARTS)?)
    }

    /// The rows of one page between `lo` and `hi`, ascending or descending, as (key columns, key, value).
    fn page(&self, lo: &Bound<Vec<SqlValue>>, hi: &Bound<Vec<SqlValue>>, desc: bool, n: usize) -> Result<Vec<Encoded>> {
        let mut params = Vec::new();
        let conds: Vec<String> = [bound_sql(lo.clone(), true, &mut params), bound_sql(hi.clone(), false, &mut params)]
            .into_iter()
            .flatten()
            .collect();
        let dir = if desc { " DESC" } else { "" };
        let order = (0..K::PARTS).map(|i| format!("k{i}{dir}")).collect::<Vec<_>>().join(", ");
        let sql = format!(
            "SELECT {}, {} FROM \"{}\"{}{} ORDER BY {order} LIMIT {n}",
            list("k", K::PARTS),
            Self::value_cols(),
            self.name,
            if conds.is_empty() { "" } else { " WHERE " },
            conds.join(" AND "),
        );
        let rows = self.query(&sql, &params)?;
        rows.iter()
            .map(|r| {
                let key = columns(r, 0, K::PARTS)?;
                let enc = K::encode(&key)?;
                Ok((key, enc, Self::value(r, K::PARTS)?))
            })
            .collect()
    }

    /// The value under `key`, in redb's encoding. A write transaction answers keys it wrote or read before
    /// without a statement.
    pub fn get(&self, key: &Borrowed<'_, K>) -> Result<Option<Vec<u8>>> {
        let cols = key_of::<K>(key);
        let fp = fingerprint(&cols);
        let mut tx = self.tx.lock();
        if !tx.ahead.is_empty() {
            tx.queue_ahead(self.name, vec![cols.clone()]);
            tx.send_ahead()?;
        }
        if let Some(known) = tx.known_value(self.name, &fp) {
            return known.map(|v| V::encode(&v)).transpose();
        }
        let sql = format!("SELECT {} FROM \"{}\" WHERE {}", Self::value_cols(), self.name, key_eq(K::PARTS));
        let rows = tx.conn_point(self.name)?.query(&sql, &cols)?;
        let value = rows.first().map(|r| columns(r, 0, V::PARTS)).transpose()?;
        let out = value.as_ref().map(|v| V::encode(v)).transpose()?;
        tx.remember(self.name, fp, value);
        Ok(out)
    }

    /// The rows of the kind whose first `parts` key columns equal those of one of `keys` (key columns, at least
    /// `parts` of them each), with the index of that key: one statement, the keys travelling as arrays
    /// (`unnest(..) WITH ORDINALITY`) joined to the kind's table. `select` names the columns after the index,
    /// `order` is appended (an `ORDER BY` or nothing).
    fn by_keys(&self, keys: &[Vec<SqlValue>], parts: usize, select: &str, order: &str) -> Result<Vec<(usize, Row)>> {
        Self::by_keys_on(self.tx.lock().conn_scanning(self.name)?, self.name, keys, parts, select, order)
    }

    /// [`PgTable::by_keys`] on `conn`.
    fn by_keys_on(
        conn: &mut Conn,
        name: &str,
        keys: &[Vec<SqlValue>],
        parts: usize,
        select: &str,
        order: &str,
    ) -> Result<Vec<(usize, Row)>> {
        let Some(first) = keys.first() else { return Ok(Vec::new()) };
        let join = (0..parts).map(|i| format!("t.k{i} = q.p{i}")).collect::<Vec<_>>().join(" AND ");
        let sql = format!(
            "SELECT q.i, {select} FROM unnest({}) WITH ORDINALITY AS q({}, i) JOIN \"{}\" t ON {join}{order}",
            array_params(&first[..parts], 1),
            list("p", parts),
            name,
        );
        let trimmed: Vec<Vec<SqlValue>> = keys.iter().map(|k| k[..parts].to_vec()).collect();
        let arrs = arrays(trimmed);
        let refs: Vec<&(dyn ToSql + Sync)> = arrs.iter().map(|c| c.as_ref() as &(dyn ToSql + Sync)).collect();
        let rows = conn.query_typed(&sql, &refs)?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let i = r.try_get::<_, i64>(0).map_err(|e| pg_error("reading a column failed", e))?;
            if let Some(i) = usize::try_from(i - 1).ok().filter(|i| *i < keys.len()) {
                out.push((i, r));
            }
        }
        Ok(out)
    }

    /// The values under each of `keys`, in their order (`None` where nothing is stored), in one statement
    /// joined on the whole primary key. A write transaction answers keys it wrote or read before without one.
    pub fn get_many(&self, keys: &[Borrowed<'_, K>]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = vec![None; keys.len()];
        let mut tx = self.tx.lock();
        if !tx.ahead.is_empty() {
            tx.queue_ahead(self.name, keys.iter().map(key_of::<K>).collect());
            tx.send_ahead()?;
        }
        let mut asked: Vec<(usize, String, Vec<SqlValue>)> = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            let cols = key_of::<K>(k);
            let fp = fingerprint(&cols);
            match tx.known_value(self.name, &fp) {
                Some(known) => out[i] = known.map(|v| V::encode(&v)).transpose()?,
                None => asked.push((i, fp, cols)),
            }
        }
        if asked.is_empty() {
            return Ok(out);
        }
        let params: Vec<Vec<SqlValue>> = asked.iter().map(|a| a.2.clone()).collect();
        let values = if V::PARTS == 0 { "1".to_string() } else { list("t.v", V::PARTS) };
        let rows = Self::by_keys_on(tx.conn_point(self.name)?, self.name, &params, K::PARTS, &values, "")?;
        let mut found: Vec<Option<Vec<SqlValue>>> = vec![None; asked.len()];
        for (j, r) in rows {
            found[j] = Some(columns(&r, 1, V::PARTS)?);
        }
        for ((i, fp, _), value) in asked.into_iter().zip(found) {
            out[i] = value.as_ref().map(|v| V::encode(v)).transpose()?;
            tx.remember(self.name, fp, value);
        }
        Ok(out)
    }

    /// For each of `keys`, the records whose first `parts` key parts equal its own, in key order, in one
    /// statement joined on those parts only.
    pub fn prefix_many(&self, keys: &[Borrowed<'_, K>], parts: usize) -> Result<Vec<Vec<RawPair>>> {
        let parts = parts.clamp(1, K::PARTS);
        let mut out = vec![Vec::new(); keys.len()];
        let params: Vec<Vec<SqlValue>> = keys.iter().map(key_of::<K>).collect();
        let values = if V::PARTS == 0 { "1".to_string() } else { list("t.v", V::PARTS) };
        let order = (0..K::PARTS).map(|i| format!("t.k{i}")).collect::<Vec<_>>().join(", ");
        let select = format!("{}, {values}", list("t.k", K::PARTS));
        for (i, r) in self.by_keys(&params, parts, &select, &format!(" ORDER BY q.i, {order}"))? {
            out[i].push((K::encode(&columns(&r, 1, K::PARTS)?)?, Self::value(&r, 1 + K::PARTS)?));
        }
        Ok(out)
    }

    /// The records in `range`, in key order, fetched in keyset pages.
    pub fn range<'a, KR>(&self, range: impl RangeBounds<KR> + 'a) -> Result<PgRows<'t, K, V>>
    where
        KR: Borrow<Borrowed<'a, K>> + 'a,
    {
        let lo = bound_of::<K, KR>(range.start_bound());
        let hi = bound_of::<K, KR>(range.end_bound());
        Ok(PgRows {
            table: PgTable { tx: self.tx.clone(), name: self.name, side: None, types: PhantomData },
            lo,
            hi,
            front: VecDeque::new(),
            back: VecDeque::new(),
            exhausted: false,
        })
    }

    /// The number of records.
    pub fn len(&self) -> Result<u64> {
        let rows = self.query(&format!("SELECT count(*) FROM \"{}\"", self.name), &[])?;
        Ok(rows.first().and_then(|r| r.try_get::<_, i64>(0).ok()).unwrap_or(0).max(0) as u64)
    }

    /// Whether the kind holds no record.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The first or last record.
    pub fn end(&self, last: bool) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(self.page(&Bound::Unbounded, &Bound::Unbounded, last, 1)?.pop().map(|(_, k, v)| (k, v)))
    }

    /// Stores `value` under `key`, returning the value replaced: [`PgTable::get`], then [`PgTable::put`].
    pub fn insert(&mut self, key: &Borrowed<'_, K>, value: &Borrowed<'_, V>) -> Result<Option<Vec<u8>>> {
        let old = self.get(key)?;
        self.put(key, value)?;
        Ok(old)
    }

    /// Stores `value` under `key` without reading the value replaced: held back and sent with the
    /// transaction's other held-back writes in one statement, when a scan of this table or the commit comes
    /// (`Pending`). For the `vectors` kind the pgvector row is held back with it.
    pub fn put(&mut self, key: &Borrowed<'_, K>, value: &Borrowed<'_, V>) -> Result<()> {
        self.hold(key, value, false)
    }

    /// [`PgTable::put`] of a key no stored record has (the caller knows, as for a posting of a document
    /// number its transaction allocated): sent without conflict handling, and by binary `COPY` when a flush
    /// holds at least 1,000 of them for this kind. A key that is stored after all fails that statement,
    /// and so the transaction (PostgreSQL's `unique_violation`): nothing is overwritten.
    pub fn put_new(&mut self, key: &Borrowed<'_, K>, value: &Borrowed<'_, V>) -> Result<()> {
        self.hold(key, value, true)
    }

    /// Holds back a put; `fresh`: the key is new to the table ([`PgTable::put_new`]).
    fn hold(&mut self, key: &Borrowed<'_, K>, value: &Borrowed<'_, V>, fresh: bool) -> Result<()> {
        let mut row = key_of::<K>(key);
        V::to_sql(value, &mut row);
        let fp = fingerprint(&row[..K::PARTS]);
        let mut tx = self.tx.lock();
        if tx
            .pending
            .iter()
            .any(|p| p.table == self.name && (p.rows.len() - p.fresh_rows >= PENDING_MAX || p.fresh_rows >= FRESH_MAX))
        {
            tx.flush()?;
        }
        if let (Some(index), [SqlValue::Text(space), SqlValue::U64(docno), SqlValue::Bytes(b)]) =
            (&self.side, row.as_slice())
        {
            let v = crate::storage::codec::vector_from_bytes(b);
            let key = (space.clone(), *docno as i64);
            let side = tx.side.get_or_insert_with(|| SidePending {
                index: index.clone(),
                rows: Vec::new(),
                by_key: HashMap::new(),
            });
            if let Some(&i) = side.by_key.get(&key) {
                side.rows.swap_remove(i);
                side.by_key.remove(&key);
                if let Some(moved) = side.rows.get(i) {
                    side.by_key.insert((moved.0.clone(), moved.1), i);
                }
            }
            if v.is_empty() {
                // No vector: its pgvector row goes (vectors::put deletes for an empty one).
                let conn = tx.conn()?;
                vectors::delete(&mut |sql, p| conn.exec(sql, p), &key.0, key.1)?;
            } else {
                side.by_key.insert(key.clone(), side.rows.len());
                side.rows.push((key.0, key.1, v));
            }
        }
        tx.unremember(self.name, &fp);
        let at = match tx.pending.iter().position(|p| p.table == self.name) {
            Some(i) => i,
            None => {
                let keys = list("k", K::PARTS);
                let cols = if V::PARTS == 0 { keys.clone() } else { format!("{keys}, {}", list("v", V::PARTS)) };
                let on_conflict = if V::PARTS == 0 {
                    "DO NOTHING".to_string()
                } else {
                    let set: Vec<String> = (0..V::PARTS).map(|i| format!("v{i} = EXCLUDED.v{i}")).collect();
                    format!("DO UPDATE SET {}", set.join(", "))
                };
                tx.pending.push(Pending {
                    table: self.name,
                    head: format!("INSERT INTO \"{}\" ({cols}) SELECT * FROM unnest(", self.name),
                    tail: format!(") ON CONFLICT ({keys}) {on_conflict}"),
                    cols,
                    parts: K::PARTS,
                    rows: Vec::new(),
                    fresh: Vec::new(),
                    fresh_rows: 0,
                    by_key: HashMap::new(),
                });
                tx.pending.len() - 1
            }
        };
        let p = &mut tx.pending[at];
        match p.by_key.get(&fp) {
            // The held-back row is replaced; it keeps its kind: a row new to the table stays new (none was
            // sent), one that may replace a stored record keeps its conflict handling.
            Some(&i) => p.rows[i] = row,
            None => {
                p.by_key.insert(fp, p.rows.len());
                p.rows.push(row);
                p.fresh.push(fresh);
                p.fresh_rows += usize::from(fresh);
            }
        }
        Ok(())
    }

    /// Deletes every record of the kind in one statement (and, for `vectors`, every pgvector row).
    pub fn clear(&mut self) -> Result<()> {
        let mut tx = self.tx.lock();
        tx.forget(self.name);
        let conn = tx.conn()?;
        conn.query(&format!("DELETE FROM \"{}\"", self.name), &[])?;
        if self.side.is_some() {
            conn.query("DELETE FROM engram_vectors", &[])?;
        }
        Ok(())
    }

    /// Deletes the side row (pgvector) of a `vectors` key.
    fn delete_side(&self, key: &[SqlValue]) -> Result<()> {
        if let (Some(_), [SqlValue::Text(space), SqlValue::U64(docno)]) = (&self.side, key) {
            let mut tx = self.tx.lock();
            let conn = tx.conn()?;
            vectors::delete(&mut |sql, p| conn.exec(sql, p), space, *docno as i64)?;
        }
        Ok(())
    }

    /// Deletes the record under `key`, returning its value.
    pub fn remove(&mut self, key: &Borrowed<'_, K>) -> Result<Option<Vec<u8>>> {
        let sql = format!("DELETE FROM \"{}\" WHERE {} RETURNING {}", self.name, key_eq(K::PARTS), Self::value_cols());
        let key = key_of::<K>(key);
        self.delete_side(&key)?;
        let old = match self.query(&sql, &key)?.first() {
            Some(r) => Some(Self::value(r, 0)?),
            None => None,
        };
        self.tx.lock().remember(self.name, fingerprint(&key), None);
        Ok(old)
    }

    /// Deletes the records in `range` for which `keep` is false.
    pub fn retain_in<'a, KR, F: for<'f> FnMut(Borrowed<'f, K>, Borrowed<'f, V>) -> bool>(
        &mut self,
        range: impl RangeBounds<KR> + 'a,
        mut keep: F,
    ) -> Result<()>
    where
        KR: Borrow<Borrowed<'a, K>> + 'a,
    {
        let mut lo = bound_of::<K, KR>(range.start_bound());
        let hi = bound_of::<K, KR>(range.end_bound());
        let sql = format!("DELETE FROM \"{}\" WHERE {}", self.name, key_eq(K::PARTS));
        self.tx.lock().forget(self.name);
        loop {
            let page = self.page(&lo, &hi, false, PAGE)?;
            let full = page.len() == PAGE;
            for (cols, k, v) in &page {
                if !keep(decode::<K>(k), decode::<V>(v)) {
                    self.query(&sql, cols)?;
                    self.delete_side(cols)?;
                }
            }
            match page.into_iter().last() {
                Some((cols, _, _)) if full => lo = Bound::Excluded(cols),
                _ => return Ok(()),
            }
        }
    }
}

/// Records in key order from a [`PgTable`], fetched a page at a time from either end: the next page from the
/// front starts after the last key fetched at the front, the next from the back before the last fetched at the
/// back, so the two ends never hand out one record twice.
pub struct PgRows<'a, K, V> {
    pub(super) table: PgTable<'a, K, V>,
    pub(super) lo: Bound<Vec<SqlValue>>,
    pub(super) hi: Bound<Vec<SqlValue>>,
    pub(super) front: VecDeque<(Vec<u8>, Vec<u8>)>,
    pub(super) back: VecDeque<(Vec<u8>, Vec<u8>)>,
    pub(super) exhausted: bool,
}

pub(super) type Item<'a, K, V> = Result<(crate::storage::Got<'a, K>, crate::storage::Got<'a, V>)>;

impl<'a, K: KeyType, V: ValueType> PgRows<'a, K, V> {
    fn fill(&mut self, desc: bool) -> Result<()> {
        let page = self.table.page(&self.lo, &self.hi, desc, PAGE)?;
        if page.len() < PAGE {
            self.exhausted = true;
        }
        if let Some((cols, _, _)) = page.last() {
            if desc {
                self.hi = Bound::Excluded(cols.clone());
            } else {
                self.lo = Bound::Excluded(cols.clone());
            }
        }
        let buf = if desc { &mut self.back } else { &mut self.front };
        buf.extend(page.into_iter().map(|(_, k, v)| (k, v)));
        Ok(())
    }

    fn take(&mut self, desc: bool) -> Option<Item<'a, K, V>> {
        let own = if desc { &self.back } else { &self.front };
        if own.is_empty()
            && !self.exhausted
            && let Err(e) = self.fill(desc)
        {
            self.exhausted = true;
            return Some(Err(e));
        }
        let got = if desc {
            self.back.pop_front().or_else(|| self.front.pop_back())
        } else {
            self.front.pop_front().or_else(|| self.back.pop_back())
        };
        got.map(|(k, v)| Ok((crate::storage::Got::owned(k), crate::storage::Got::owned(v))))
    }
}

impl<'a, K: KeyType, V: ValueType> Iterator for PgRows<'a, K, V> {
    type Item = Item<'a, K, V>;
    fn next(&mut self) -> Option<Self::Item> {
        self.take(false)
    }
}

impl<K: KeyType, V: ValueType> DoubleEndedIterator for PgRows<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.take(true)
    }
}
